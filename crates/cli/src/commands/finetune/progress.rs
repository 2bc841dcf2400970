//! What a run shows and records: a progress bar on a terminal (step, loss, eval loss,
//! tokens/s, ETA), a JSON line a step in `OUT.log.jsonl`, and the closing summary.

use std::fs::{File, OpenOptions};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use super::super::CliError;

/// One step's record (a line of the log).
#[derive(Debug, Clone, Serialize)]
pub struct StepLine {
    pub step: u64,
    pub epoch: u64,
    pub loss: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_loss: Option<f64>,
    pub grad_norm: f64,
    pub lr: f64,
    pub tokens: usize,
    pub seconds: f64,
    /// The step was not applied: its gradient was not finite (written only where true; the
    /// next line takes the same step number).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
}

pub struct Progress {
    bar: ProgressBar,
    log: File,
    log_path: PathBuf,
    json: bool,
    tokens: usize,
    seconds: f64,
    steps_run: u64,
    /// Steps skipped, their gradient not finite (not among `steps_run`).
    skipped: u64,
    first_loss: Option<f64>,
    last_loss: f64,
    last_eval: Option<f64>,
    eval_before: Option<f64>,
}

/// `OUT.log.jsonl`.
pub fn log_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".log.jsonl");
    PathBuf::from(name)
}

impl Progress {
    /// A bar for `total` steps from `done`; the log appended to when resuming, else started.
    pub fn new(
        out: &Path,
        total: u64,
        done: u64,
        json: bool,
        resume: bool,
    ) -> Result<Progress, CliError> {
        let target = if json || !std::io::stderr().is_terminal() {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:30} {pos}/{len} steps {elapsed_precise} (ETA {eta}) {msg}",
            )
            .expect("a valid template"),
        );
        bar.set_position(done);
        let log_path = log_path(out);
        let log = OpenOptions::new()
            .create(true)
            .write(true)
            .append(resume)
            .truncate(!resume)
            .open(&log_path)?;
        Ok(Progress {
            bar,
            log,
            log_path,
            json,
            tokens: 0,
            seconds: 0.0,
            steps_run: 0,
            skipped: 0,
            first_loss: None,
            last_loss: f64::NAN,
            last_eval: None,
            eval_before: None,
        })
    }

    /// Records the eval loss before the first step (a log line of step 0).
    pub fn eval_before(&mut self, loss: Option<f64>) -> Result<(), CliError> {
        writeln!(
            self.log,
            "{}",
            serde_json::json!({"step": 0, "eval_loss": loss})
        )?;
        self.eval_before = loss;
        if let Some(l) = loss
            && !self.json
        {
            self.bar
                .suspend(|| eprintln!("eval loss before training: {l:.4}"));
        }
        Ok(())
    }

    /// Records a step: the log line, the bar, and a plain line every 10% off a terminal. A
    /// skipped step is a line on stderr instead (whatever `--json`: it is a warning), and
    /// neither moves the bar nor counts among the steps run or their losses.
    pub fn step(&mut self, line: &StepLine) -> Result<(), CliError> {
        writeln!(self.log, "{}", serde_json::to_string(line)?)?;
        self.tokens += line.tokens;
        self.seconds += line.seconds;
        if line.skipped {
            self.skipped += 1;
            self.warn(&format!(
                "step {}: skipped, the gradient was not finite (NaN or infinite; loss {:.4}): \
                 the adapter and AdamW's state are unchanged, the next batch retries the step",
                line.step, line.loss
            ));
            return Ok(());
        }
        self.steps_run += 1;
        self.first_loss.get_or_insert(line.loss);
        self.last_loss = line.loss;
        if line.eval_loss.is_some() {
            self.last_eval = line.eval_loss;
        }
        let rate = line.tokens as f64 / line.seconds.max(1e-9);
        let eval = self
            .last_eval
            .map(|e| format!(" eval {e:.4}"))
            .unwrap_or_default();
        let msg = format!("loss {:.4}{eval} {rate:.0} tok/s", line.loss);
        self.bar.set_position(line.step);
        self.bar.set_message(msg.clone());
        let total = self.bar.length().unwrap_or(1);
        if self.bar.is_hidden()
            && !self.json
            && (line.step * 10 / total.max(1) != (line.step - 1) * 10 / total.max(1)
                || line.step == total)
        {
            eprintln!("step {}/{total}: {msg}", line.step);
        }
        Ok(())
    }

    /// `OUT.log.jsonl`, as written so far.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// A line on stderr that does not tear the bar.
    pub fn warn(&self, msg: &str) {
        self.bar.suspend(|| eprintln!("{msg}"));
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// The closing lines (or `--json`'s object) on stdout.
    pub fn summary(
        &self,
        out: &Path,
        ckpt: &Path,
        eval: Option<f64>,
        seconds: f64,
    ) -> Result<(), CliError> {
        let steps = self.bar.position();
        let rate = self.tokens as f64 / self.seconds.max(1e-9);
        if self.json {
            let v = serde_json::json!({
                "steps": steps,
                "steps_run": self.steps_run,
                "skipped_steps": self.skipped,
                "first_loss": self.first_loss,
                "loss": self.last_loss,
                "eval_loss": eval,
                "eval_loss_before": self.eval_before,
                "tokens_per_second": rate,
                "seconds": seconds,
                "adapter": out,
                "checkpoint": ckpt,
                "log": self.log_path,
            });
            println!("{v}");
        } else {
            let eval = match (self.eval_before, eval) {
                (Some(b), Some(e)) => format!(", eval loss {b:.4} -> {e:.4}"),
                (None, Some(e)) => format!(", eval loss {e:.4}"),
                _ => String::new(),
            };
            let skipped = match self.skipped {
                0 => String::new(),
                n => format!(
                    "; {n} step{} skipped, the gradient not finite",
                    if n == 1 { "" } else { "s" }
                ),
            };
            println!(
                "trained {} steps (to step {steps}) in {seconds:.1} s ({rate:.0} tokens/s): loss {:.4} -> {:.4}{eval}{skipped}",
                self.steps_run,
                self.first_loss.unwrap_or(f64::NAN),
                self.last_loss
            );
            println!(
                "adapter: {} (rullama run --lora, llama.cpp --lora)",
                out.display()
            );
            println!(
                "checkpoint: {}; log: {}",
                ckpt.display(),
                self.log_path.display()
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(step: u64, loss: f64, skipped: bool) -> StepLine {
        StepLine {
            step,
            epoch: 0,
            loss,
            eval_loss: None,
            grad_norm: if skipped { f64::NAN } else { 0.5 },
            lr: 1e-3,
            tokens: 10,
            seconds: 0.1,
            skipped,
        }
    }

    /// A skipped step's log line says so (an applied one's has no such field), keeps its
    /// loss, and the step counts as skipped, not among the steps run or their losses.
    #[test]
    fn a_skipped_step_is_logged_and_counted_apart() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("a.gguf");
        let mut progress = Progress::new(&out, 4, 0, true, false).unwrap();
        progress.step(&line(1, 2.5, false)).unwrap();
        progress.step(&line(2, 7.0, true)).unwrap();
        progress.step(&line(2, 2.0, false)).unwrap();
        let log = std::fs::read_to_string(log_path(&out)).unwrap();
        let lines: Vec<serde_json::Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1]["skipped"], true);
        assert_eq!(lines[1]["loss"], 7.0);
        assert!(lines[0].get("skipped").is_none() && lines[2].get("skipped").is_none());
        assert_eq!((progress.steps_run, progress.skipped), (2, 1));
        assert_eq!((progress.first_loss, progress.last_loss), (Some(2.5), 2.0));
        assert_eq!(progress.bar.position(), 2);
        assert_eq!(progress.tokens, 30);
    }
}
