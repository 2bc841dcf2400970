//! `rullama tokenize --json` against llama.cpp's ids (data/oracle/tokenize.jsonl). The
//! tokenizer crate checks every oracle line; this checks that the command's flags map onto
//! llama-server's `add_special` / `parse_special` for a few lines of each model.

use serde_json::Value;

mod common;

#[test]
fn ids_match_llama_cpp_through_the_command_line() {
    let oracle = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/oracle/tokenize.jsonl"
    ))
    .expect("data/oracle/tokenize.jsonl");
    let lines: Vec<Value> = oracle
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut checked = 0;
    for model in ["gemma3-270m", "smollm2-135m", "qwen2.5-0.5b"] {
        assert!(
            rullama_gguf::store::cached_test_model(model).is_some(),
            "{model} is not cached: run `cargo xtask models`"
        );
        let of_model = lines.iter().filter(|l| l["model"] == model);
        // The first four lines (with and without special tokens) and every parse_special one.
        let picked = of_model
            .enumerate()
            .filter(|(i, l)| *i < 4 || l["parse_special"] == true);
        for (_, line) in picked {
            let mut cmd =
                common::command(&["tokenize", "--json", model, line["text"].as_str().unwrap()]);
            if line["add_special"] == false {
                cmd.arg("--no-special");
            }
            if line["parse_special"] == true {
                cmd.arg("--parse-special");
            }
            let out = cmd.output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let got: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(got["ids"], line["ids"], "{model}: {line}");
            assert_eq!(
                got["pieces"].as_array().map(Vec::len),
                line["ids"].as_array().map(Vec::len)
            );
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} oracle lines checked");
}
