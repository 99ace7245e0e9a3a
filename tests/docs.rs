//! The documentation says what the code does: the README's configuration for Base is one
//! the real parser takes, with the token `chains.toml` ships for Base; every chapter file
//! of the book is in its table of contents; and the book's `chains.toml` examples name
//! exactly the keys the parser accepts, table by table, as the parser itself lists them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use paywatch_core::config::parse_chains;
use paywatch_core::state::FinalityRule;
use paywatch_tests::tools::repo_root;

fn read(path: &str) -> String {
    let path = repo_root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fenced ```toml blocks of a Markdown text.
fn toml_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_start()) {
            (None, "```toml") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn the_readmes_base_configuration_is_one_the_parser_takes() {
    let readme = read("README.md");
    let section = readme
        .split("## Watching Base")
        .nth(1)
        .expect("a section Watching Base");
    let block = toml_blocks(section).into_iter().next().expect("its chains.toml");
    let env = |name: &str| (name == "PAYWATCH_RPC_BASE").then(|| "https://base.example".to_string());
    let chains = parse_chains(&block, "README.md", env).unwrap_or_else(|e| panic!("{e}"));
    let base = chains.network("base").expect("the base network");
    assert_eq!(base.id.to_string(), "eip155:8453");
    assert_eq!(base.rpc_urls[0].as_str(), "https://base.example/");
    assert_eq!(base.finality, FinalityRule::Confirmations(10));
    let shipped = read("chains.toml");
    assert!(
        parse_chains(&shipped, "chains.toml", |_| None)
            .unwrap()
            .network("base")
            .is_none(),
        "chains.toml ships base disabled"
    );
    // Base's tables alone, enabled.
    let base_tables: String = shipped
        .split("\n[")
        .filter(|table| {
            table.starts_with("networks.\"eip155:8453\"") || table.starts_with("[networks.\"eip155:8453\".")
        })
        .map(|table| format!("[{table}\n"))
        .collect();
    let shipped_base = parse_chains(
        &base_tables.replace("enabled = false", "enabled = true"),
        "chains.toml",
        |_| Some("https://rpc.example".to_string()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let shipped_usdc = &shipped_base.network("base").expect("base in chains.toml").tokens[0];
    let token = &base.tokens[0];
    assert_eq!(
        (token.address.to_string(), &token.symbol, token.decimals),
        (
            shipped_usdc.address.to_string(),
            &shipped_usdc.symbol,
            shipped_usdc.decimals
        ),
        "the README's token is the one chains.toml ships for Base"
    );
}

#[test]
fn every_chapter_is_in_the_table_of_contents() {
    let summary = read("docs/src/SUMMARY.md");
    let chapters: BTreeSet<String> = std::fs::read_dir(repo_root().join("docs/src"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md") && name != "SUMMARY.md")
        .collect();
    for chapter in &chapters {
        assert!(
            summary.contains(&format!("({chapter})")),
            "{chapter} is not in SUMMARY.md"
        );
    }
    assert!(chapters.len() >= 15, "{chapters:?}");
}

/// The keys the parser accepts in the table `header` opens, as its refusal of an unknown
/// key lists them (serde's `expected one of …`).
fn accepted_keys(header: &str) -> BTreeSet<String> {
    let text = format!("{header}\nnot_a_key = 1\n");
    let error = parse_chains(&text, "probe", |_| None)
        .err()
        .unwrap_or_else(|| panic!("{header}: an unknown key was taken"))
        .to_string();
    // (serde: "expected `a`", "expected `a` or `b`", "expected one of `a`, `b`, …".)
    let listed = error
        .split(", expected")
        .nth(1)
        .unwrap_or_else(|| panic!("{header}: {error}"));
    listed.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// The kind of table a `chains.toml` header opens.
fn table_kind(header: &str) -> Option<&'static str> {
    let header = header.trim();
    if header.starts_with("[[networks.") && header.ends_with(".tokens]]") {
        Some("token")
    } else if header.starts_with("[networks.") {
        Some("network")
    } else {
        match header {
            "[api]" => Some("api"),
            "[review]" => Some("review"),
            "[[webhooks]]" => Some("webhook"),
            _ => None,
        }
    }
}

#[test]
fn the_book_names_exactly_the_keys_the_parser_accepts() {
    let mut documented: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let book: PathBuf = repo_root().join("docs/src");
    for entry in std::fs::read_dir(&book).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for block in toml_blocks(&text) {
            let mut kind = None;
            for line in block.lines() {
                if line.trim_start().starts_with('[') {
                    kind = table_kind(line);
                    if kind == Some("token") {
                        // A token table is the network's `tokens` key.
                        documented
                            .entry("network")
                            .or_default()
                            .insert("tokens".to_string());
                    }
                    continue;
                }
                let key = line.split('=').next().unwrap_or_default().trim();
                if let Some(kind) = kind
                    && line.contains('=')
                    && !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                {
                    documented.entry(kind).or_default().insert(key.to_string());
                }
            }
        }
    }
    for (kind, header) in [
        ("network", "[networks.\"eip155:1\"]"),
        (
            "token",
            "[networks.\"eip155:1\"]\n[[networks.\"eip155:1\".tokens]]",
        ),
        ("api", "[api]"),
        ("review", "[review]"),
        ("webhook", "[[webhooks]]"),
    ] {
        let accepted = accepted_keys(header);
        let named = documented.get(kind).cloned().unwrap_or_default();
        let undocumented: Vec<&String> = accepted.difference(&named).collect();
        let unknown: Vec<&String> = named.difference(&accepted).collect();
        assert!(
            undocumented.is_empty() && unknown.is_empty(),
            "{kind} tables: the parser takes {undocumented:?}, which no example in docs/ names; \
             docs/ names {unknown:?}, which the parser refuses"
        );
    }
}

/// The id mdBook gives a heading: its text without Markdown code marks, lower case, spaces
/// as `-`, and only letters, digits, `-` and `_` kept.
fn heading_id(heading: &str) -> String {
    heading
        .replace('`', "")
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

#[test]
fn every_anchor_a_chapter_links_to_is_a_heading_there() {
    let book = repo_root().join("docs/src");
    let ids_of = |chapter: &str| -> BTreeSet<String> {
        std::fs::read_to_string(book.join(chapter))
            .unwrap_or_else(|e| panic!("{chapter}: {e}"))
            .lines()
            .filter_map(|line| line.strip_prefix('#'))
            .map(|heading| heading_id(heading.trim_start_matches('#')))
            .collect()
    };
    let mut checked = 0;
    for entry in std::fs::read_dir(&book).unwrap() {
        let path = entry.unwrap().path();
        let chapter = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        for link in text.split("](").skip(1) {
            let target = link.split(')').next().unwrap_or_default();
            let Some((file, anchor)) = target.split_once('#') else {
                continue;
            };
            if file.contains("://") {
                continue;
            }
            let file = if file.is_empty() { chapter.as_str() } else { file };
            assert!(
                ids_of(file).contains(anchor),
                "{chapter} links to {file}#{anchor}, which is no heading there"
            );
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} anchors found");
}
