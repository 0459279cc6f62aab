//! A person at an upstream's authorization server (tests/fixtures/upstream_idp.mjs, whose
//! `oidc-provider` dev interactions are what a hosted MCP server's own login would be): on its
//! login form they type their login and a password (any password signs in whoever is typed) and
//! submit; on its consent page they confirm. The browser then goes back to wherever the
//! authorization request said (a loopback `/oauth/callback`).
//!
//! Each step is taken once per page: the script marks the page it acted on, so a page that is
//! slow to go away is not filled in twice. A page that is neither (an error the authorization
//! server shows) fails the story with its text after [`WAIT`].

use std::time::{Duration, Instant};

use fantoccini::Client;
use hangar_tests::serde_json::{Value, json};

use crate::browser::{WAIT, click, current_url, type_into};

/// The login form (oidc-provider's dev `login` view): its hidden `prompt` says `login`.
const LOGIN_FORM: &str = "form input[name=\"prompt\"][value=\"login\"]";
/// The consent page (oidc-provider's dev `interaction` view): its hidden `prompt` says `consent`.
const CONSENT_FORM: &str = "form input[name=\"prompt\"][value=\"consent\"]";

/// Signs in at the authorization server as `login` and confirms, starting wherever the browser
/// is now (on its way there, on the login form, or on the consent page), until the browser is
/// at an address starting with `back_at`. A browser the authorization server still remembers
/// skips the login form; one whose grant it remembers may skip consent: both are fine.
pub async fn sign_in_upstream(browser: &Client, login: &str, back_at: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let url = current_url(browser).await;
        if url.starts_with(back_at) {
            return;
        }
        if !acted_here(browser).await {
            if present(browser, LOGIN_FORM).await {
                mark_acted(browser).await;
                type_into(browser, "form input[name=\"login\"]", login).await;
                type_into(browser, "form input[name=\"password\"]", "any password").await;
                click(browser, "form button[type=\"submit\"]").await;
                continue;
            }
            if present(browser, CONSENT_FORM).await {
                mark_acted(browser).await;
                click(browser, "form button[type=\"submit\"]").await;
                continue;
            }
        }
        if Instant::now() > deadline {
            let body = page_text(browser).await;
            panic!("{login} never got back to {back_at} after {WAIT:?}: the browser is at {url}, showing {body:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn present(browser: &Client, selector: &str) -> bool {
    let script = "return document.querySelector(arguments[0]) !== null;";
    browser.execute(script, vec![json!(selector)]).await.ok() == Some(json!(true))
}

/// Whether this step already acted on the page the browser shows (a new page has no mark).
async fn acted_here(browser: &Client) -> bool {
    browser.execute("return window.hangarTestActed === true;", vec![]).await.ok() == Some(json!(true))
}

async fn mark_acted(browser: &Client) {
    browser.execute("window.hangarTestActed = true;", vec![]).await.expect("the page runs a script");
}

/// What the page says, for a failure's message.
async fn page_text(browser: &Client) -> String {
    match browser.execute("return document.body ? document.body.innerText : '';", vec![]).await {
        Ok(Value::String(text)) => text.chars().take(2000).collect(),
        _ => String::new(),
    }
}
