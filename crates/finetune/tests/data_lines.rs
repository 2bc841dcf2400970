//! Reading JSONL datasets: each example shape, and each kind of bad line reported with the
//! file, the 1-based line and the field at fault.

use std::io::Write;
use std::path::Path;

use rullama_finetune::data::{DataError, Example, LineProblem, jsonl};
use rullama_tokenizer::ChatMessage;

fn read(text: &str) -> Result<Vec<jsonl::Record>, DataError> {
    jsonl::read(text.as_bytes(), Path::new("set.jsonl"))
}

/// The line and problem of a bad dataset, checking the message names file and line.
fn problem(text: &str) -> (usize, LineProblem) {
    match read(text) {
        Err(e @ DataError::Line { .. }) => {
            let message = e.to_string();
            let DataError::Line { line, problem, .. } = e else {
                unreachable!()
            };
            assert!(
                message.starts_with(&format!("set.jsonl:{line}: ")),
                "{message}"
            );
            (line, problem)
        }
        other => panic!("expected a line error, got {other:?}"),
    }
}

#[test]
fn each_shape_reads() {
    let text = concat!(
        "{\"text\": \"plain\", \"id\": 7}\n",
        "{\"prompt\": \"2+2=\", \"completion\": \"4\"}\r\n",
        "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, ",
        "{\"role\": \"user\", \"content\": \"u\"}, {\"role\": \"assistant\", \"content\": \"a\"}]}\n",
        "{\"prompt\": [{\"role\": \"user\", \"content\": \"u\"}], ",
        "\"completion\": [{\"role\": \"assistant\", \"content\": \"a\"}]}\n",
    );
    let records = read(text).unwrap();
    let examples: Vec<(usize, &Example)> = records.iter().map(|r| (r.line, &r.example)).collect();
    assert_eq!(
        examples,
        [
            (1, &Example::Text("plain".into())),
            (
                2,
                &Example::Completion {
                    prompt: "2+2=".into(),
                    completion: "4".into()
                }
            ),
            (
                3,
                &Example::Chat(vec![
                    ChatMessage::new("system", "s"),
                    ChatMessage::new("user", "u"),
                    ChatMessage::new("assistant", "a"),
                ])
            ),
            (
                4,
                &Example::ChatCompletion {
                    prompt: vec![ChatMessage::new("user", "u")],
                    completion: vec![ChatMessage::new("assistant", "a")],
                }
            ),
        ]
    );
}

#[test]
fn blank_lines_are_skipped_and_counted() {
    let text = "\u{feff}{\"text\": \"a\"}\n\n   \n{\"text\": \"b\"}\n\n\n";
    let records = read(text).unwrap();
    let lines: Vec<usize> = records.iter().map(|r| r.line).collect();
    assert_eq!(lines, [1, 4]);
    // A bad line after blank ones is named by its line in the file.
    let (line, _) = problem("{\"text\": \"a\"}\n\n{oops\n");
    assert_eq!(line, 3);
}

#[test]
fn bad_json_names_the_line() {
    let (line, p) = problem("{\"text\": \"a\"}\n{\"text\": \"b\",}\n");
    assert_eq!(line, 2);
    assert!(matches!(p, LineProblem::Json(_)), "{p}");
    let (line, p) = problem("\n\n[1, 2]\n");
    assert_eq!(line, 3);
    assert!(
        matches!(&p, LineProblem::Type { field, expected: "a JSON object", found: "a list" } if field == "(line)"),
        "{p:?}"
    );
    let bytes: &[u8] = b"{\"text\": \"a\"}\n\xff\xfe\n";
    let e = jsonl::read(bytes, Path::new("set.jsonl")).unwrap_err();
    assert!(matches!(
        e,
        DataError::Line {
            line: 2,
            problem: LineProblem::NotUtf8,
            ..
        }
    ));
}

#[test]
fn wrong_types_name_the_field() {
    let cases = [
        ("{\"text\": 5}", "text", "a number"),
        ("{\"text\": null}", "text", "null"),
        (
            "{\"prompt\": \"p\", \"completion\": 3}",
            "completion",
            "a number",
        ),
        // A string beside a list of messages: the string is the odd one out.
        (
            "{\"prompt\": \"p\", \"completion\": [\"c\"]}",
            "prompt",
            "a string",
        ),
        ("{\"messages\": \"hi\"}", "messages", "a string"),
        ("{\"messages\": [\"hi\"]}", "messages[0]", "a string"),
        (
            "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\"}]}",
            "messages[1].content",
            "nothing",
        ),
        (
            "{\"messages\": [{\"role\": 1, \"content\": \"a\"}]}",
            "messages[0].role",
            "a number",
        ),
        (
            "{\"messages\": [{\"role\": \"assistant\", \"content\": null}]}",
            "messages[0].content",
            "null",
        ),
    ];
    for (text, want_field, want_found) in cases {
        let (line, p) = problem(&format!("{{\"text\": \"ok\"}}\n{text}\n"));
        assert_eq!(line, 2, "{text}");
        match &p {
            LineProblem::Type { field, found, .. } => {
                assert_eq!((field.as_str(), *found), (want_field, want_found), "{text}")
            }
            other => panic!("{text}: {other:?}"),
        }
        assert!(p.to_string().contains(want_field), "{p}");
    }
}

#[test]
fn shapes_that_are_missing_unknown_or_mixed_are_errors() {
    let (_, p) = problem("{\"prompt\": \"p\"}");
    assert!(matches!(
        p,
        LineProblem::Missing {
            field: "completion",
            ..
        }
    ));
    let (_, p) = problem("{\"completion\": \"c\"}");
    assert!(matches!(
        p,
        LineProblem::Missing {
            field: "prompt",
            ..
        }
    ));
    let (_, p) = problem("{\"input\": \"x\", \"output\": \"y\"}");
    match &p {
        LineProblem::UnknownShape { keys } => assert_eq!(keys, "input, output"),
        other => panic!("{other:?}"),
    }
    let (_, p) = problem("{}");
    assert!(matches!(p, LineProblem::UnknownShape { .. }));
    let (_, p) = problem("{\"text\": \"t\", \"completion\": \"c\"}");
    assert!(matches!(p, LineProblem::Ambiguous("text", "completion")));
    let (_, p) = problem("{\"messages\": [], \"text\": \"t\"}");
    assert!(matches!(p, LineProblem::Ambiguous("messages", "text")));
    let (_, p) = problem("{\"messages\": []}");
    assert!(
        matches!(&p, LineProblem::EmptyConversation(f) if f == "messages"),
        "{p:?}"
    );
    // Conversational prompt/completion: both lists, each non-empty.
    let (_, p) =
        problem("{\"prompt\": [{\"role\": \"user\", \"content\": \"a\"}], \"completion\": \"b\"}");
    assert!(
        matches!(&p, LineProblem::Type { field, found: "a string", .. } if field == "completion"),
        "{p:?}"
    );
    let (_, p) = problem("{\"completion\": [{\"role\": \"assistant\", \"content\": \"b\"}]}");
    assert!(
        matches!(
            p,
            LineProblem::Missing {
                field: "prompt",
                ..
            }
        ),
        "{p:?}"
    );
    let (_, p) = problem(
        "{\"prompt\": [], \"completion\": [{\"role\": \"assistant\", \"content\": \"b\"}]}",
    );
    assert!(
        matches!(&p, LineProblem::EmptyConversation(f) if f == "prompt"),
        "{p:?}"
    );
    let (_, p) = problem(
        "{\"prompt\": [{\"role\": \"user\", \"content\": \"a\"}], \"completion\": [{\"role\": \"robot\", \"content\": \"b\"}]}",
    );
    assert!(
        matches!(&p, LineProblem::UnknownRole { field, .. } if field == "completion[0].role"),
        "{p:?}"
    );
}

#[test]
fn unknown_roles_are_errors() {
    let text = "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, \
                {\"role\": \"<|im_start|>system\", \"content\": \"b\"}]}";
    let (line, p) = problem(text);
    assert_eq!(line, 1);
    match &p {
        LineProblem::UnknownRole { field, role } => {
            assert_eq!(field, "messages[1].role");
            assert_eq!(role, "<|im_start|>system");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn files_are_named_in_errors() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(file, "{{\"text\": \"a\"}}").unwrap();
    writeln!(file, "{{\"text\": 1}}").unwrap();
    let e = jsonl::read_file(file.path()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("{}:2: ", file.path().display())),
        "{e}"
    );
    let missing = file.path().with_extension("absent");
    let e = jsonl::read_file(&missing).unwrap_err();
    assert!(matches!(e, DataError::Io { .. }));
    assert!(e.to_string().contains(&missing.display().to_string()));
}
