//! The CLI under careless and hostile input (issue 26): values out of range, contexts no
//! machine holds, corrupt files. Every run is bounded in time and in address space, and
//! ends with success or an error of the CLI's own, never a signal, a panic or an allocation
//! past its budget. On the tiny synthetic SmolLM2 (1 KiB of KV cache a position, trained
//! with 256), CPU executor unless a case is the GPU's: milliseconds a run.

use std::time::Duration;

use rullama_gguf::{GgufFile, GgufWriter, Value};
use rullama_synth::{Tiny, tiny_model};

mod common;
use common::{rullama_within, tiny, tiny_bytes};

/// Time a run may take (each takes well under a second).
const LIMIT: Duration = Duration::from_secs(60);
/// Address space a CPU run may take, GiB: far below what any rejected context would need.
const BUDGET_GIB: u64 = 2;

fn run(args: &[&str]) -> (i32, String, String) {
    rullama_within(args, LIMIT, BUDGET_GIB)
}

/// A clear error: exit 1, stderr one `error: ` line (or clap's usage error, exit 2).
fn assert_error(code: i32, stderr: &str, says: &str) {
    assert!(code == 1 || code == 2, "exit {code}: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(says), "expected {says:?} in: {stderr}");
}

/// The tiny model with metadata `key` set to `value`.
fn tiny_with(key: &str, value: impl Into<Value>) -> tempfile::TempPath {
    let file = GgufFile::from_bytes(tiny_model(Tiny::Smollm2, 7)).unwrap();
    let mut w = GgufWriter::from_file(&file);
    w.metadata_mut().insert(key, value);
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    tiny_bytes(&bytes)
}

fn path(p: &tempfile::TempPath) -> &str {
    p.to_str().unwrap()
}

/// The values the issue found accepted, each refused before the model is even looked for
/// (the model named does not exist), by run, chat and bench alike, naming the flag.
#[test]
fn sampling_values_out_of_range_are_refused_before_loading() {
    for (flags, says) in [
        (
            &["--temp", "-1"][..],
            "--temp -1 is out of range: it takes a finite number >= 0",
        ),
        (&["--temp", "nan"][..], "--temp NaN is out of range"),
        (&["--temp=inf"][..], "--temp inf is out of range"),
        (
            &["--top-p", "2"][..],
            "--top-p 2 is out of range: it takes a number from 0 to 1",
        ),
        (&["--min-p", "-0.5"][..], "--min-p -0.5 is out of range"),
        (
            &["--repeat-penalty", "0"][..],
            "--repeat-penalty 0 is out of range: it takes a finite number > 0",
        ),
        (
            &["--repeat-penalty", "-1"][..],
            "--repeat-penalty -1 is out of range",
        ),
        (
            &["--repeat-penalty", "NaN"][..],
            "--repeat-penalty NaN is out of range",
        ),
        // Negative where the type allows none: clap refuses it.
        (
            &["--top-k", "-5"][..],
            "invalid value '-5' for '--top-k <TOP_K>'",
        ),
        (&["--ctx", "0"][..], "invalid value '0' for '--ctx <CTX>'"),
        // 2^60 (the GPU sized its cache at 960 bytes) and 2^64 - 1 (it divided by zero).
        (
            &["--ctx", "1152921504606846976"][..],
            "is not in 1..=4294967295",
        ),
        (
            &["--ctx", "18446744073709551615"][..],
            "is not in 1..=4294967295",
        ),
        (
            &["--threads", "0"][..],
            "invalid value '0' for '--threads <THREADS>'",
        ),
    ] {
        for command in ["run", "chat"] {
            let mut args = vec![command, "no-such-model"];
            args.extend_from_slice(flags);
            let (code, stdout, stderr) = run(&args);
            assert!(stdout.is_empty());
            assert_error(code, &stderr, says);
        }
    }
    let (code, _, stderr) = run(&["bench", "no-such-model", "--temp", "nan"]);
    assert_error(code, &stderr, "--temp NaN is out of range");
}

/// Contexts no machine holds: an error saying how many positions would fit, on the CPU
/// (against the memory available) and the GPU (against its largest binding), before
/// anything of that size is allocated; `bench` likewise for a prompt of billions.
#[test]
fn contexts_no_machine_holds_are_errors_saying_what_fits() {
    let model = tiny(Tiny::Smollm2);
    let m = path(&model);
    // 4 * 10^9 positions of 1 KiB: 3.7 TiB.
    let (code, _, stderr) = run(&["run", m, "hi", "--backend", "cpu", "--ctx", "4000000000"]);
    assert_error(
        code,
        &stderr,
        "a context of 4000000000 positions needs 3.73 TiB of KV cache",
    );
    assert!(stderr.contains("positions fit"), "{stderr}");
    let (code, _, stderr) = run(&[
        "bench",
        m,
        "--backend",
        "cpu",
        "-p",
        "3000000000",
        "-n",
        "0",
    ]);
    assert_error(
        code,
        &stderr,
        "a context of 3000000000 positions needs 2.79 TiB of KV cache",
    );
    // The cases (each aborted): 10^8 positions, 95 GiB here, as a context and as
    // bench's prompt; past the memory available or, where a machine has that much, past
    // the address-space budget.
    for args in [
        &["run", m, "hi", "--backend", "cpu", "--ctx", "100000000"][..],
        &["bench", m, "--backend", "cpu", "-p", "100000000", "-n", "0"][..],
    ] {
        let (code, _, stderr) = run(args);
        assert_error(
            code,
            &stderr,
            "a context of 100000000 positions needs 95.37 GiB of KV cache, more than ",
        );
    }
    // Past the address-space budget but maybe within the memory available: the reservation
    // fails, not the process (3 GiB of cache in a 2 GiB budget).
    let (code, _, stderr) = run(&[
        "run",
        m,
        "hi",
        "--backend",
        "cpu",
        "--ctx",
        "3145728",
        "-n",
        "1",
    ]);
    assert_error(
        code,
        &stderr,
        "a context of 3145728 positions needs 3.00 GiB of KV cache",
    );

    // The GPU (lavapipe in CI; Vulkan reserves address space of its own, so no budget here).
    for args in [
        &[
            "run",
            m,
            "hi",
            "--backend",
            "gpu",
            "--ctx",
            "4000000000",
            "-n",
            "1",
        ][..],
        &["inspect", m, "--gpu", "--ctx", "4000000000", "--no-tensors"][..],
    ] {
        let (code, _, stderr) = rullama_within(args, LIMIT, 1 << 20);
        assert_error(code, &stderr, "a context of 4000000000 positions needs");
        assert!(
            stderr.contains("the GPU's largest buffer binding"),
            "{stderr}"
        );
        assert!(stderr.contains("positions fit"), "{stderr}");
    }
}

/// A penalty window longer than any context is the whole context, not an allocation of it.
#[test]
fn a_penalty_window_past_any_context_runs() {
    let model = tiny(Tiny::Smollm2);
    let (code, stdout, stderr) = run(&[
        "run",
        path(&model),
        "hi",
        "--backend",
        "cpu",
        "-n",
        "3",
        "--repeat-penalty",
        "1.1",
        "--repeat-last-n",
        "10000000000",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.is_empty());
}

/// A corrupt `block_count`: 2^32 - 1 layers is refused before anything is sized by it (run
/// and `inspect --gpu`); a count the tensors allow names the first missing tensors and a
/// count, in one short line.
#[test]
fn a_corrupt_block_count_is_a_short_error() {
    let huge = tiny_with("llama.block_count", u32::MAX);
    let says = "block_count 4294967295 is more than the file's";
    let (code, _, stderr) = run(&["run", path(&huge), "hi", "--backend", "cpu"]);
    assert_error(code, &stderr, says);
    let (code, _, stderr) = rullama_within(&["inspect", path(&huge), "--gpu"], LIMIT, 1 << 20);
    assert_error(code, &stderr, says);

    let deep = tiny_with("llama.block_count", 12u32);
    let (code, _, stderr) = run(&["run", path(&deep), "hi", "--backend", "cpu"]);
    assert_error(code, &stderr, "missing tensors (90): blk.2.");
    assert!(stderr.trim_end().ends_with(" and 82 more"), "{stderr}");
    assert!(stderr.len() < 500, "one short line: {stderr}");
}

/// Corrupt or odd files: a zero training context, a BOS id outside the vocabulary, a
/// directory where a file is expected.
#[test]
fn corrupt_files_are_errors_at_load() {
    let zero = tiny_with("llama.context_length", 0u32);
    let (code, _, stderr) = run(&["run", path(&zero), "hi", "--backend", "cpu"]);
    assert_error(code, &stderr, "invalid model config: context_length is 0");

    let bos = tiny_with("tokenizer.ggml.bos_token_id", 100_000u32);
    let (code, _, stderr) = run(&["run", path(&bos), "hi", "--backend", "cpu"]);
    assert_error(
        code,
        &stderr,
        "tokenizer.ggml.bos_token_id is 100000, outside the vocabulary of 512 tokens",
    );

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (code, _, stderr) = run(&["run", d, "hi"]);
    assert_error(
        code,
        &stderr,
        &format!("{d} is a directory, not a GGUF file"),
    );
}

/// Why generation stopped: a full context is said on stderr (it would look like the model's
/// own end), and `--verbose` gives the reason of every run as Ollama's `done_reason`.
#[test]
fn says_why_generation_stopped() {
    let model = tiny(Tiny::Smollm2);
    let m = path(&model);
    let greedy = ["--backend", "cpu", "--temp", "0"];
    let with = |extra: &[&str]| {
        let mut args = vec!["run", m, "hello there"];
        args.extend_from_slice(&greedy);
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 0, "{stderr}");
        (stdout, stderr)
    };
    // The prompt is a few tokens: a context of 8 fills before 20 tokens.
    let (_, stderr) = with(&["--ctx", "8", "-n", "20", "--verbose"]);
    assert!(
        stderr
            .contains("note: generation stopped: the context of 8 tokens is full (--ctx sets it)"),
        "{stderr}"
    );
    assert!(stderr.contains("done reason:          context"), "{stderr}");
    let (_, stderr) = with(&["--ctx", "8", "-n", "20"]);
    assert!(stderr.starts_with("note: generation stopped"), "{stderr}");

    let (_, stderr) = with(&["-n", "3", "--verbose"]);
    let reason = stderr
        .lines()
        .find_map(|l| l.strip_prefix("done reason:"))
        .map(str::trim);
    assert!(matches!(reason, Some("length" | "stop")), "{stderr}");
    assert!(!stderr.contains("note:"), "{stderr}");
    let (_, stderr) = with(&["-n", "2"]);
    assert!(
        stderr.is_empty(),
        "nothing but the text without --verbose: {stderr}"
    );

    // One token comes with the prompt's step: no decode rate to give (was 67,512 t/s).
    let (_, stderr) = with(&["-n", "1", "--verbose"]);
    assert!(
        stderr.contains("eval rate:            n/a (the first token comes with the prompt)"),
        "{stderr}"
    );
}

/// A context past the training context runs, with a warning; more threads than cores too.
#[test]
fn warnings_for_a_long_context_and_many_threads() {
    let model = tiny(Tiny::Smollm2);
    let m = path(&model);
    let (code, _, stderr) = run(&[
        "run",
        m,
        "hi",
        "--backend",
        "cpu",
        "-n",
        "1",
        "--ctx",
        "300",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(
            "warning: --ctx 300 is longer than the 256 positions the model was trained with"
        ),
        "{stderr}"
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = (cores + 1).to_string();
    let (code, _, stderr) = run(&[
        "run",
        m,
        "hi",
        "--backend",
        "cpu",
        "-n",
        "1",
        "--threads",
        &threads,
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "warning: --threads {threads} is more than the {cores} cores"
        )),
        "{stderr}"
    );
}

/// `-n` cut inside a character: the partial bytes are held, never printed as U+FFFD, so the
/// text of every `-n k` is the start of the text of a longer run. With this seed the 4th
/// token ends with the first byte of `κ`, which the 5th completes (before, `-n 4` ended with
/// U+FFFD where `-n 12` has `κ`).
#[test]
fn a_cut_inside_a_character_prints_no_replacement() {
    let model = tiny(Tiny::Smollm2);
    let m = path(&model);
    let text = |n: usize| {
        let n = n.to_string();
        let args = [
            "run",
            m,
            "hi",
            "--backend",
            "cpu",
            "--temp",
            "1",
            "--seed",
            "1",
            "-n",
            &n,
        ];
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 0, "{stderr}");
        stdout.strip_suffix('\n').unwrap_or(&stdout).to_string()
    };
    const N: usize = 12;
    let full = text(N);
    assert!(
        full.contains("writeκ"),
        "the case this test is for: {full:?}"
    );
    for n in 1..N {
        let part = text(n);
        assert!(
            full.starts_with(&part),
            "-n {n}: {part:?} is not the start of {full:?}"
        );
    }
}

/// Perplexity's flags: `--chunks 0` and a chunk too short to mean anything are refused
/// before loading; its help lists no sampling flag; run's gives `--steps-per-submit`'s range.
#[test]
fn perplexity_and_help_flags() {
    let (code, _, stderr) = run(&["perplexity", "no-such-model", "-f", "x", "--chunks", "0"]);
    assert_error(code, &stderr, "--chunks must be at least 1");
    let (code, _, stderr) = run(&["perplexity", "no-such-model", "-f", "x", "--ctx", "8"]);
    assert_error(
        code,
        &stderr,
        "--ctx 8 is too short for perplexity: a chunk takes at least 16",
    );

    let (code, help, _) = run(&["perplexity", "--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--temp",
        "--top-k",
        "--top-p",
        "--min-p",
        "--repeat-penalty",
        "--seed",
        "-n,",
    ] {
        assert!(!help.contains(flag), "{flag} in perplexity --help:\n{help}");
    }
    let (code, help, _) = run(&["run", "--help"]);
    assert_eq!(code, 0);
    assert!(
        help.contains("1 to 8"),
        "--steps-per-submit's range:\n{help}"
    );
}
