//! No crate has a cycle among its modules: modules depend downward only.
//!
//! Each crate's source is read from its root (`src/lib.rs` or `src/main.rs`) along its `mod`
//! declarations (test-only ones left out), each file parsed with `syn`. The nodes are files; an
//! edge is a path in one file that names an item of another: a `use`, or a `crate::`, `super::`,
//! `self::` or child-module path anywhere in the code, followed through the `use` lines of the
//! file it lands in to the file that defines the item. A module's own file (`mod.rs` or
//! `foo.rs`) and its children are one module: the parent's references down into its own children
//! are its table of contents, not a dependency, while a child's reference up to its parent is.
//! Test-only code (`#[cfg(test)]` items) is left out, and so are paths inside macro calls (their
//! tokens are not parsed). A cycle fails the test, named file by file, unless the allow-list
//! below names it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Cycles allowed for now, each one as the test prints it (`crate: file -> file -> ...`,
/// starting at its smallest file), with the reason and the work that removes it. Empty: no
/// crate has one.
const ALLOWED: &[&str] = &[];

/// The crates checked: every workspace member.
const CRATES: &[&str] = &[
    "hangar-api",
    "hangar-bench",
    "hangar-cli",
    "hangar-core",
    "hangar-guardian",
    "hangar-prober",
    "hangar-runtime",
    "hangar-supervisor",
    "hangar-upstream-fake",
    "tests",
];

#[test]
fn no_crate_has_a_cycle_among_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for name in CRATES {
        let krate = Crate::read(&root.join(name));
        for cycle in krate.cycles() {
            found.push(format!("{name}: {}", cycle.join(" -> ")));
        }
    }
    let unexpected: Vec<&String> = found.iter().filter(|c| !ALLOWED.contains(&c.as_str())).collect();
    let gone: Vec<&&str> = ALLOWED.iter().filter(|a| !found.iter().any(|c| c == **a)).collect();
    assert!(unexpected.is_empty(), "module cycles (modules must depend downward only):\n{}", lines(&unexpected));
    assert!(gone.is_empty(), "allowed cycles that no longer exist; remove them from ALLOWED:\n{}", lines(&gone));
}

#[test]
fn the_check_finds_a_cycle_and_names_its_files() {
    let cycles = cycles_of(&[
        ("lib.rs", "mod a; mod b; mod c;"),
        ("a.rs", "use crate::b::Deep; pub struct A;"),
        ("b.rs", "mod deep; pub use deep::Deep; pub fn top() { self::deep::f(); }"),
        ("b/deep.rs", "pub struct Deep; pub fn f() { super::super::c::g(); }"),
        ("c.rs", "pub fn g() { let _ = crate::a::A; }\n#[cfg(test)] mod tests { use crate::b::top; }"),
    ]);
    assert_eq!(cycles, vec![vec!["a.rs", "b/deep.rs", "c.rs", "a.rs"]]);
}

#[test]
fn a_child_may_use_its_parent_and_a_test_may_use_anything() {
    let cycles = cycles_of(&[
        ("main.rs", "mod a; mod b; fn main() { a::run(); }"),
        ("a.rs", "mod child; pub struct A; pub fn run() { child::go(); }"),
        ("a/child.rs", "use super::A; pub fn go() { let _ = A; crate::b::f(); }"),
        ("b.rs", "pub fn f() {}\n#[cfg(test)]\nmod tests { use crate::a::A; }"),
    ]);
    assert_eq!(cycles, Vec::<Vec<String>>::new());
}

/// The cycles of a crate made of `files` (path under `src/`, text).
fn cycles_of(files: &[(&str, &str)]) -> Vec<Vec<String>> {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join("src").join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    Crate::read(dir.path()).cycles()
}

fn lines<T: std::fmt::Display>(items: &[T]) -> String {
    items.iter().map(|c| format!("  {c}\n")).collect()
}

/// One parsed file: where it sits among the modules, and what it imports and names.
struct File {
    /// Its module path: empty for the crate root.
    module: Vec<String>,
    /// Its path under `src/`, as the report names it.
    name: String,
    /// The names its `use` lines bind (outside test code), each to an absolute path.
    imports: BTreeMap<String, Vec<String>>,
    /// Every path it names (absolute, resolved where it was written).
    references: Vec<Vec<String>>,
}

struct Crate {
    files: Vec<File>,
    by_module: BTreeMap<Vec<String>, usize>,
}

impl Crate {
    /// Reads a crate from its root file along its non-test `mod` declarations.
    fn read(dir: &Path) -> Crate {
        let src = dir.join("src");
        let root = ["lib.rs", "main.rs"].iter().map(|r| src.join(r)).find(|p| p.exists()).unwrap();
        let mut krate = Crate { files: Vec::new(), by_module: BTreeMap::new() };
        let mut queue = vec![(root, Vec::<String>::new())];
        while let Some((path, module)) = queue.pop() {
            let text = std::fs::read_to_string(&path).unwrap();
            let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut reader = Reader { module: module.clone(), scope: module.clone(), file: FileRefs::default() };
            reader.visit_file(&ast);
            // Where this file's children live: `foo/` beside `foo.rs`, or this `mod.rs`'s folder.
            let folder = match path.file_name().and_then(|n| n.to_str()) {
                Some("lib.rs" | "main.rs" | "mod.rs") => path.parent().unwrap().to_path_buf(),
                _ => path.with_extension(""),
            };
            for child in &reader.file.children {
                let mut sub = module.clone();
                sub.push(child.clone());
                let flat = folder.join(format!("{child}.rs"));
                let nested = folder.join(child).join("mod.rs");
                let file: PathBuf = if flat.exists() { flat } else { nested };
                queue.push((file, sub));
            }
            let name = path.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            krate.by_module.insert(module.clone(), krate.files.len());
            krate.files.push(File { module, name, imports: reader.file.imports, references: reader.file.references });
        }
        krate
    }

    /// The file that defines what `path` names: the deepest file module it enters, followed
    /// through that file's `use` lines when the next name is one it imports.
    fn target(&self, path: &[String], depth: usize) -> Option<usize> {
        let mut at = None;
        let mut used = 0;
        for k in 0..=path.len() {
            if let Some(&file) = self.by_module.get(&path[..k]) {
                at = Some(file);
                used = k;
            }
        }
        let file = at?;
        if depth < 8
            && let Some(name) = path.get(used)
            && let Some(import) = self.files[file].imports.get(name)
        {
            let mut next = import.clone();
            next.extend_from_slice(&path[used + 1..]);
            if next != path {
                return self.target(&next, depth + 1).or(Some(file));
            }
        }
        Some(file)
    }

    /// The edges between files, a parent's references into its own children left out.
    fn edges(&self) -> BTreeMap<usize, BTreeSet<usize>> {
        let mut edges: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        for (from, file) in self.files.iter().enumerate() {
            for reference in &file.references {
                let Some(to) = self.target(reference, 0) else { continue };
                let theirs = &self.files[to].module;
                if to != from && !theirs.starts_with(&file.module) {
                    edges.entry(from).or_default().insert(to);
                }
            }
        }
        edges
    }

    /// One shortest cycle through each strongly connected group of files, each as its file
    /// names from the smallest back to itself.
    fn cycles(&self) -> Vec<Vec<String>> {
        let edges = self.edges();
        let mut cycles = BTreeSet::new();
        let mut covered = BTreeSet::new();
        let mut order: Vec<usize> = (0..self.files.len()).collect();
        order.sort_by(|a, b| self.files[*a].name.cmp(&self.files[*b].name));
        for start in order {
            if covered.contains(&start) {
                continue;
            }
            // A breadth-first search back to `start` finds its shortest cycle.
            let mut parent: BTreeMap<usize, usize> = BTreeMap::new();
            let mut frontier = vec![start];
            let mut closed = None;
            'search: while !frontier.is_empty() {
                let mut next = Vec::new();
                for node in frontier {
                    for &to in edges.get(&node).into_iter().flatten() {
                        if to == start {
                            closed = Some(node);
                            break 'search;
                        }
                        if let std::collections::btree_map::Entry::Vacant(seen) = parent.entry(to) {
                            seen.insert(node);
                            next.push(to);
                        }
                    }
                }
                frontier = next;
            }
            let Some(mut node) = closed else { continue };
            let mut cycle = vec![start];
            while node != start {
                cycle.push(node);
                node = parent[&node];
            }
            cycle.reverse();
            // Rotate to begin at its smallest name, and close it.
            let names: Vec<String> = cycle.iter().map(|&f| self.files[f].name.clone()).collect();
            let first = (0..names.len()).min_by(|a, b| names[*a].cmp(&names[*b])).unwrap();
            let mut named: Vec<String> = names[first..].iter().chain(&names[..first]).cloned().collect();
            named.push(named[0].clone());
            covered.extend(cycle);
            cycles.insert(named);
        }
        cycles.into_iter().collect()
    }
}

#[derive(Default)]
struct FileRefs {
    children: Vec<String>,
    imports: BTreeMap<String, Vec<String>>,
    references: Vec<Vec<String>>,
}

/// Walks one file: `module` is the file's module, `scope` the inline module being read.
struct Reader {
    module: Vec<String>,
    scope: Vec<String>,
    file: FileRefs,
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Meta>().is_ok_and(|m| m.path().is_ident("test")))
}

impl Reader {
    /// The absolute module path `segments` names from the current scope, or `None` for a path
    /// that leaves the crate (another crate, the prelude, a local name).
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        let (mut base, mut rest) = match first.as_str() {
            "crate" => (Vec::new(), &segments[1..]),
            "self" => (self.scope.clone(), &segments[1..]),
            "super" => (self.scope.clone(), segments),
            _ if self.scope == self.module && self.file.children.contains(first) => (self.scope.clone(), segments),
            _ => {
                let import = self.file.imports.get(first)?;
                let mut path = import.clone();
                path.extend_from_slice(&segments[1..]);
                return Some(path);
            }
        };
        while rest.first().is_some_and(|s| s == "super") {
            base.pop()?;
            rest = &rest[1..];
        }
        base.extend_from_slice(rest);
        Some(base)
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.bind(prefix, &n.ident, &n.ident),
            syn::UseTree::Rename(r) => self.bind(prefix, &r.ident, &r.rename),
            syn::UseTree::Glob(_) => {
                if let Some(path) = self.absolute(prefix) {
                    self.file.references.push(path);
                }
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    fn bind(&mut self, prefix: &[String], ident: &syn::Ident, name: &syn::Ident) {
        let mut segments = prefix.to_vec();
        if ident != "self" {
            segments.push(ident.to_string());
        }
        let Some(path) = self.absolute(&segments) else { return };
        let name = if name == "self" { prefix.last().cloned().unwrap_or_default() } else { name.to_string() };
        if name != "_" && self.scope == self.module {
            self.file.imports.insert(name, path.clone());
        }
        self.file.references.push(path);
    }
}

impl<'ast> Visit<'ast> for Reader {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Trait(t) => &t.attrs,
            syn::Item::Type(t) => &t.attrs,
            syn::Item::Macro(m) => &m.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        match &item.content {
            None if self.scope == self.module => self.file.children.push(item.ident.to_string()),
            None => {}
            Some((_, items)) => {
                self.scope.push(item.ident.to_string());
                for item in items {
                    self.visit_item(item);
                }
                self.scope.pop();
            }
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1
            && let Some(absolute) = self.absolute(&segments)
        {
            self.file.references.push(absolute);
        }
        syn::visit::visit_path(self, path);
    }
}
