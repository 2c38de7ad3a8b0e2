//! The workspace's source rules that no compiler checks: every file says what it is for,
//! no test is ignored, and no two top-level modules of a crate import each other (the
//! layers ARCHITECTURE.md states).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace's crates, by their source folder.
const CRATE_SOURCES: [&str; 3] = ["sim/src", "engine/src", "scenarios/src"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the scenarios crate is in the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    // Bounded: one round per folder of the tree.
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source folder") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// `source` without its comments' lines and its `#[cfg(test)]` modules (their braces
/// matched), what a build without tests compiles.
fn code_without_tests(source: &str) -> String {
    let mut code = String::new();
    let mut rest = source;
    // Bounded: each round consumes one test module or the rest.
    while let Some(at) = rest.find("#[cfg(test)]\nmod ") {
        code.push_str(&rest[..at]);
        let module = &rest[at..];
        let open = module
            .find(['{', ';'])
            .expect("a test module's body or `;`");
        if module[open..].starts_with(';') {
            // `mod tests;`: its file is skipped as a test file.
            rest = &module[open + 1..];
            continue;
        }
        let mut depth = 0usize;
        let mut end = module.len();
        for (i, c) in module[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &module[end..];
    }
    code.push_str(rest);
    code.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level module a file of a crate's `src` belongs to (`lib` for `lib.rs`).
fn top_module(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("a file of the crate");
    let first = relative
        .components()
        .next()
        .expect("a path")
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The pairs of top-level modules that reach each other through `crate::` paths in code
/// that is not a test.
fn cycles_of(src: &Path) -> Vec<(String, String)> {
    let mut imports: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in rust_files(src) {
        let is_test = file.file_name().is_some_and(|n| n == "tests.rs")
            || file.components().any(|c| c.as_os_str() == "tests");
        if is_test {
            continue;
        }
        let module = top_module(src, &file);
        let code = code_without_tests(&std::fs::read_to_string(&file).expect("a source file"));
        for (at, _) in code.match_indices("crate::") {
            let name: String = code[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != module {
                imports.entry(module.clone()).or_default().insert(name);
            }
        }
    }
    let reaches = |from: &str, to: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        // Bounded: each module is pushed once.
        while let Some(module) = stack.pop() {
            for next in imports.get(&module).into_iter().flatten() {
                if next == to {
                    return true;
                }
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        false
    };
    let mut cycles = Vec::new();
    for (module, imported) in &imports {
        for other in imported {
            if module < other && reaches(other, module) {
                cycles.push((module.clone(), other.clone()));
            }
        }
    }
    cycles
}

#[test]
fn no_two_top_level_modules_import_each_other() {
    for crate_src in CRATE_SOURCES {
        let cycles = cycles_of(&workspace().join(crate_src));
        assert_eq!(cycles, Vec::<(String, String)>::new(), "{crate_src}");
    }
}

/// The checker itself finds a cycle, through a third module, and ignores tests and comments.
#[test]
fn the_layer_check_sees_a_cycle_and_only_in_code() {
    let dir = std::env::temp_dir().join(format!("keel-layers-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("b")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
    write("lib.rs", "//! x\nmod a;\nmod b;\nmod c;\n");
    write("a.rs", "//! x\nuse crate::b::B;\n");
    write("b.rs", "//! x\n// crate::a in a comment\nmod inner;\n");
    write("b/inner.rs", "//! x\nuse crate::c::C;\n");
    write(
        "c.rs",
        "//! x\n#[cfg(test)]\nmod tests {\n    use crate::b::B;\n}\n",
    );
    assert_eq!(cycles_of(&src), vec![]);
    write("c.rs", "//! x\nfn f() { crate::a::f() }\n");
    assert_eq!(
        cycles_of(&src),
        vec![
            ("a".to_string(), "b".to_string()),
            ("b".to_string(), "c".to_string())
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_source_file_says_what_it_is_for_and_no_test_is_ignored() {
    let mut files = Vec::new();
    for crate_src in CRATE_SOURCES {
        files.extend(rust_files(&workspace().join(crate_src)));
        let tests = workspace().join(crate_src).with_file_name("tests");
        if tests.is_dir() {
            files.extend(rust_files(&tests));
        }
    }
    assert!(files.len() > 100, "{} files", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with("//!"),
            "{}: no `//!` line first",
            file.display()
        );
        let ignore = ["#[", "ignore"].concat();
        assert!(
            !text.contains(&ignore),
            "{}: an ignored test",
            file.display()
        );
    }
}
