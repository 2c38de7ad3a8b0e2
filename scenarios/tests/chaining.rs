//! The smallest job graph is the chapter's engine: `keel job CMD --sources 1 --parallelism 1`
//! over events without keys chains into one task and prints, byte for byte, what `keel CMD`
//! prints (report, trace, fingerprint, exit code); the task graph's options are refused on
//! it, and keys or `--disable-chaining` run it as three tasks.

use std::io::Write;
use std::process::{Command, Stdio};

/// `keel <args>` with `stdin`: exit code, stdout, stderr; a panic fails.
fn keel(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("keel runs");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(stdin.as_bytes())
        .expect("stdin written");
    let output = child.wait_with_output().expect("keel ends");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "keel {args:?}: {stderr}");
    (
        output.status.code().expect("an exit code"),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr,
    )
}

/// `keel job <line> --sources 1 --parallelism 1` prints what `keel <line>` prints.
fn check(line: &str, stdin: &str, exit_code: i32) {
    let chapter: Vec<&str> = line.split_whitespace().collect();
    let mut job = vec!["job"];
    job.extend(chapter.iter().take(1));
    job.extend(["--sources", "1", "--parallelism", "1"]);
    job.extend(chapter.iter().skip(1));
    let expected = keel(&chapter, stdin);
    assert_eq!(expected.0, exit_code, "keel {line}: {}", expected.2);
    assert!(!expected.1.is_empty(), "keel {line}");
    assert_eq!(keel(&job, stdin), expected, "keel {job:?}");
}

const TWO_WINDOWS: &str =
    "{\"ts\": 1, \"value\": 1}\n{\"ts\": 12, \"value\": 2}\n{\"ts\": 3, \"value\": 4}\n";

#[test]
fn the_one_task_graph_is_the_chapters_engine() {
    check("run", "", 0);
    check("run --fault process-crash --at-step 20 --trace", "", 0);
    check(
        "run --sink idempotent --fault power-loss --at-step 37 --crash-state 1",
        "",
        0,
    );
    check(
        "run --checkpoint-protocol checkpoint-before-sink-sync --sink idempotent --fault power-loss --at-step 30 --expect no-loss",
        "",
        1,
    );
    check(
        "run --events - --checkpoint-every 1 --trace",
        TWO_WINDOWS,
        0,
    );
    check("sweep --sinks append --faults process-crash", "", 0);
    check("explore --seeds 0..40 --jobs 1", "", 0);
}

#[test]
fn the_task_graphs_options_are_refused_on_a_chained_job() {
    for (line, option) in [
        (
            "job run --sources 1 --parallelism 1 --checkpoint-mode unaligned",
            "--checkpoint-mode",
        ),
        (
            "job run --sources 1 --parallelism 1 --schedule round-robin",
            "--schedule",
        ),
        (
            "job explore --sources 1 --parallelism 1 --checkpoint-interval-ms 5",
            "--checkpoint-interval-ms",
        ),
        (
            "job sweep --sources=1 --parallelism=1 --schedules all",
            "--schedules",
        ),
    ] {
        let args: Vec<&str> = line.split_whitespace().collect();
        let (code, stdout, stderr) = keel(&args, "");
        assert_eq!(code, 2, "keel {line}");
        assert!(stdout.is_empty(), "keel {line}: {stdout}");
        assert!(
            stderr.starts_with(&format!(
                "error: {option}: a job of one source and one operator"
            )),
            "keel {line}: {stderr}"
        );
        assert!(
            stderr.contains("--disable-chaining"),
            "keel {line}: {stderr}"
        );
    }
}

#[test]
fn keys_or_disabled_chaining_run_three_tasks() {
    let keyed =
        "{\"ts\": 1, \"value\": 1, \"key\": \"a\"}\n{\"ts\": 12, \"value\": 2, \"key\": \"b\"}\n";
    for (line, stdin) in [
        (
            "job run --sources 1 --parallelism 1 --events - --trace",
            keyed,
        ),
        (
            "job run --sources 1 --parallelism 1 --disable-chaining --trace",
            "",
        ),
    ] {
        let args: Vec<&str> = line.split_whitespace().collect();
        let (code, stdout, stderr) = keel(&args, stdin);
        assert_eq!(code, 0, "keel {line}: {stderr}");
        assert!(
            stdout.starts_with("job: sources=1 parallelism=1 "),
            "keel {line}: {stdout}"
        );
        // Three tasks: a source, an operator and the sink each act.
        for task in ["src0.read", "op0<src0", "sink<op0"] {
            assert!(stdout.contains(task), "keel {line}: no {task} in {stdout}");
        }
    }
}
