//! The README's and the user guide's console examples, run against the `keel` binary.
//!
//! Every ```console block of `README.md` and `docs/book/src/*.md` is a test case (trycmd): each
//! `$ keel ...` line runs, and what it prints must match the lines under it (`...` stands for
//! elided lines, `[..]` for an elided part of a line). A chapter's `NAME.in/` directory, where
//! there is one, is the directory its commands run in (the example files they read).
//! After a reviewed change of output: `TRYCMD=overwrite cargo test -p keel-scenarios --test docs`.

#[test]
fn readme_and_book_examples() {
    trycmd::TestCases::new()
        .register_bin("keel", trycmd::cargo::cargo_bin!("keel"))
        .case("../README.md")
        .case("../docs/book/src/*.md");
}
