//! The crate layout's rules: within each crate, modules import one another without circles
//! (a module that names `crate::other` depends on `other`; the crate root is not counted);
//! the two APIs answer through `paywatch-query`, not through each other, and gRPC does not
//! reach into axum or a chain crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module name → the sibling modules it names as `crate::…`.
fn imports_of(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = std::fs::read_dir(src)
        .expect("read src")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let stem = path.file_stem()?.to_str()?.to_string();
            (path.extension()? == "rs" && stem != "lib" && stem != "main").then_some(stem)
        })
        .collect();
    modules
        .iter()
        .map(|module| {
            let text = std::fs::read_to_string(src.join(format!("{module}.rs"))).expect("read module");
            let named = text
                .split("crate::")
                .skip(1)
                .filter_map(|rest| {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    (modules.contains(&name) && &name != module).then_some(name)
                })
                .collect();
            (module.clone(), named)
        })
        .collect()
}

/// A circle of imports in `graph`, if any.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut found = path[start..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(graph, next, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(graph, node, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_an_import_circle() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
    let mut checked = 0;
    for entry in std::fs::read_dir(&crates).expect("read crates") {
        let src = entry.expect("crate dir").path().join("src");
        if !src.is_dir() {
            continue;
        }
        let graph = imports_of(&src);
        assert!(
            circle(&graph).is_none(),
            "{}: modules import one another in a circle: {:?}",
            src.display(),
            circle(&graph)
        );
        checked += 1;
    }
    assert!(
        checked >= 8,
        "only {checked} crates found under {}",
        crates.display()
    );
}

/// The `[dependencies]` a crate's manifest names.
fn dependencies_of(crate_name: &str) -> BTreeSet<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates")
        .join(crate_name)
        .join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("read Cargo.toml");
    let table: toml::Table = text.parse().expect("Cargo.toml parses");
    table
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .map(|deps| deps.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn the_apis_answer_through_the_query_crate() {
    for api in ["paywatch-api", "paywatch-grpc"] {
        let deps = dependencies_of(api);
        assert!(
            deps.contains("paywatch-query"),
            "{api} does not use paywatch-query: {deps:?}"
        );
        for forbidden in ["paywatch-evm", "paywatch-solana", "paywatch-api", "paywatch-grpc"] {
            assert!(
                forbidden == api || !deps.contains(forbidden),
                "{api} depends on {forbidden}; queries belong in paywatch-query"
            );
        }
    }
    assert!(
        !dependencies_of("paywatch-grpc").contains("axum"),
        "paywatch-grpc depends on axum"
    );
    assert!(
        !dependencies_of("paywatch-query")
            .iter()
            .any(|d| d == "axum" || d == "tonic"),
        "paywatch-query depends on an interface's framework"
    );
}

#[test]
fn a_circle_is_found_when_there_is_one() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(str::to_string).collect()))
    .collect();
    assert_eq!(
        circle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}
