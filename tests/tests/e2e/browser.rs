//! A real browser for the stories a person drives (the status page, an upstream's login):
//! Debian's Chromium, headless, driven through chromedriver (WebDriver) with `fantoccini`, and
//! the small steps every such story takes (wait for, click, read a text or an attribute).
//!
//! Chromium and chromedriver come from `scripts/setup-tools`; without them a test fails (it
//! never skips), saying so. Each driver runs in a process group of its own with the browsers
//! it starts, all killed when it is dropped, so a failing story leaves no browser behind.

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hangar_tests::serde_json::{Map, Value, json};

/// Generous: the browser, the driver and the hangar share two cores with other tests.
pub const WAIT: Duration = Duration::from_secs(30);

/// Runs `story` in a fresh headless Chromium, closed afterwards (killed, on a failure).
pub fn in_browser(story: impl AsyncFnOnce(&Client)) {
    with_driver(async |driver| {
        let browser = driver.session().await;
        story(&browser).await;
        // On a failure the driver's process group (the browser with it) is killed instead.
        let _ = browser.close().await;
    });
}

/// Runs `story` with a chromedriver of its own, from which it opens as many browsers as it
/// needs (each [`ChromeDriver::session`] is a separate browser: its own profile and cookies,
/// as two people's machines would be).
pub fn with_driver<T>(story: impl AsyncFnOnce(&ChromeDriver) -> T) -> T {
    let driver = ChromeDriver::start();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    runtime.block_on(story(&driver))
}

/// chromedriver on a free loopback port, in a process group of its own (with the browsers it
/// starts), all killed when dropped.
pub struct ChromeDriver {
    child: Child,
    url: String,
    chromium: PathBuf,
}

impl ChromeDriver {
    pub fn start() -> ChromeDriver {
        let (Some(chromium), Some(chromedriver)) = (installed("chromium"), installed("chromedriver")) else {
            panic!(
                "this test needs Debian's chromium and chromium-driver (chromium and chromedriver on PATH or in \
                 /usr/bin); run scripts/setup-tools, which installs them"
            );
        };
        use std::os::unix::process::CommandExt;
        // Port 0: chromedriver takes a free port and says which.
        let mut child = Command::new(&chromedriver)
            .arg("--port=0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot run {}: {err}", chromedriver.display()));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(port) = line.split("started successfully on port ").nth(1) {
                    let _ = tx.send(port.trim_end_matches('.').trim().to_owned());
                }
            }
        });
        let port = rx.recv_timeout(WAIT).unwrap_or_else(|_| panic!("{} never said its port", chromedriver.display()));
        ChromeDriver { child, url: format!("http://127.0.0.1:{port}"), chromium }
    }

    /// A new headless browser: a fresh profile, no cookies.
    pub async fn session(&self) -> Client {
        let mut args = vec!["--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1100,900"];
        if nix::unistd::geteuid().is_root() {
            // Chromium refuses to run as root inside its sandbox.
            args.push("--no-sandbox");
        }
        let mut capabilities = Map::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert("goog:chromeOptions".into(), json!({"binary": self.chromium, "args": args}));
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .unwrap_or_else(|err| panic!("chromedriver at {} gave no session: {err}", self.url))
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// `name` on PATH, else in /usr/bin.
fn installed(name: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join(name)).find(|path| path.is_file()));
    on_path.or_else(|| Some(Path::new("/usr/bin").join(name)).filter(|path| path.is_file()))
}

/// Polls `check` every 100 ms until it gives `Some`, or fails naming `what` after [`WAIT`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out after {WAIT:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Clicks the first element `selector` matches, once there is one that takes the click. A live
/// page may replace the element between finding and clicking it (a list drawn again on an
/// event): then the new one is found and clicked.
pub async fn click(browser: &Client, selector: &str) {
    eventually(&format!("{selector} to be there and clicked"), || async {
        let element = browser.find(Locator::Css(selector)).await.ok()?;
        match element.click().await {
            Ok(_) => Some(()),
            Err(err) => {
                eprintln!("clicking {selector} failed, trying again: {err}");
                None
            }
        }
    })
    .await;
}

/// Types `text` into the first element `selector` matches, once there is one.
pub async fn type_into(browser: &Client, selector: &str, text: &str) {
    let element =
        eventually(&format!("{selector} to be there"), || async { browser.find(Locator::Css(selector)).await.ok() })
            .await;
    element.send_keys(text).await.unwrap_or_else(|err| panic!("cannot type into {selector}: {err}"));
}

/// The text of the first element `selector` matches, if any.
pub async fn text(browser: &Client, selector: &str) -> Option<String> {
    let script = "const node = document.querySelector(arguments[0]); return node ? node.textContent : null;";
    match browser.execute(script, vec![json!(selector)]).await.ok()? {
        Value::String(text) => Some(text),
        _ => None,
    }
}

/// An attribute of the first element `selector` matches, if any.
pub async fn attribute(browser: &Client, selector: &str, name: &str) -> Option<String> {
    let script =
        "const node = document.querySelector(arguments[0]); return node ? node.getAttribute(arguments[1]) : null;";
    match browser.execute(script, vec![json!(selector), json!(name)]).await.ok()? {
        Value::String(value) => Some(value),
        _ => None,
    }
}

/// The address the browser is at now (empty while it cannot say).
pub async fn current_url(browser: &Client) -> String {
    browser.current_url().await.map(|url| url.to_string()).unwrap_or_default()
}

/// The page as a person sees it, kept as a test artifact: `target/<name>.png`.
pub async fn screenshot(browser: &Client, name: &str) {
    let png = browser.screenshot().await.expect("a screenshot");
    let path = target_dir().join(format!("{name}.png"));
    std::fs::write(&path, png).unwrap_or_else(|err| panic!("cannot write {}: {err}", path.display()));
}

/// `target/` (the built binaries are in `target/<profile>/`).
fn target_dir() -> PathBuf {
    let supervisor = hangar_tests::bin("hangar-supervisor");
    supervisor.parent().and_then(Path::parent).expect("target directory").to_path_buf()
}
