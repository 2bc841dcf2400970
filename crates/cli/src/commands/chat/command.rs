//! The chat's commands: a line whose first word starts with `/` (Ollama's names).
//!
//! `/set` checks a value before it is used: the sampling values by the one check every
//! command runs on its flags (`SamplerParams::validate`), repeat_last_n at most the context
//! (the penalty cannot look further back), num_predict at least 1, seed any u32 (4294967295
//! picks a random one).

use rullama_model::sampler::SamplerParams;

/// What a command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `/bye`: end the chat.
    Bye,
    /// `/clear`: forget the conversation, keep the system prompt.
    Clear,
    /// `/set NAME VALUE`: change a sampling value (or the reply's length).
    Set(Setting),
    /// `/show`: the values `/set` changes.
    Show,
    /// `/?` or `/help`.
    Help,
}

/// One value `/set` changes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Setting {
    Temperature(f32),
    TopK(i32),
    TopP(f32),
    MinP(f32),
    RepeatPenalty(f32),
    RepeatLastN(usize),
    Seed(u32),
    NumPredict(usize),
}

/// The names `/set` takes.
const NAMES: &str =
    "temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed, num_predict";

pub const HELP: &str = "\
Commands:
  /set NAME VALUE   change a sampling value: temperature, top_k, top_p, min_p,
                    repeat_penalty, repeat_last_n, seed, num_predict (reply length)
  /show             the values /set changes
  /clear            forget the conversation (the system prompt stays)
  /bye              end the chat (also Ctrl-D)
  /?, /help         this help
A message of several lines goes between \"\"\" marks. Ctrl-C stops a reply; at the prompt
it ends the chat.";

/// The command `line` spells: `None` where it is a message (it does not start with `/`),
/// `Some(Err(why))` where it is a command used wrongly.
pub fn parse(line: &str) -> Option<Result<Command, String>> {
    let line = line.trim();
    if !line.starts_with('/') {
        return None;
    }
    let mut words = line.split_whitespace();
    let name = words.next().unwrap_or_default();
    let args: Vec<&str> = words.collect();
    let command = match (name, args.as_slice()) {
        ("/bye", []) => Ok(Command::Bye),
        ("/clear", []) => Ok(Command::Clear),
        ("/show", []) => Ok(Command::Show),
        ("/?" | "/help", []) => Ok(Command::Help),
        ("/set", [name, value]) => setting(name, value).map(Command::Set),
        ("/set", _) => Err(format!("usage: /set NAME VALUE, NAME one of {NAMES}")),
        ("/bye" | "/clear" | "/show" | "/?" | "/help", _) => {
            Err(format!("{name} takes no arguments"))
        }
        _ => Err(format!(
            "unknown command {name}; /? lists the commands (a message between \"\"\" marks \
             may start with /)"
        )),
    };
    Some(command)
}

/// The setting `NAME VALUE` spells, its value checked.
fn setting(name: &str, value: &str) -> Result<Setting, String> {
    let name = name.replace('-', "_");
    match name.as_str() {
        "temperature" | "temp" => Ok(Setting::Temperature(number(&name, value)?)),
        "top_k" => Ok(Setting::TopK(number(&name, value)?)),
        "top_p" => Ok(Setting::TopP(number(&name, value)?)),
        "min_p" => Ok(Setting::MinP(number(&name, value)?)),
        "repeat_penalty" => Ok(Setting::RepeatPenalty(number(&name, value)?)),
        "repeat_last_n" => Ok(Setting::RepeatLastN(number(&name, value)?)),
        "seed" => Ok(Setting::Seed(number(&name, value)?)),
        "num_predict" | "n_predict" => {
            let n = number::<usize>(&name, value)?;
            check(&name, value, n >= 1, "an integer >= 1")?;
            Ok(Setting::NumPredict(n))
        }
        _ => Err(format!("no setting {name}; /set takes {NAMES}")),
    }
}

fn number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("{name} {value}: not a number of the right kind"))
}

fn check(name: &str, value: &str, ok: bool, wanted: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("{name} {value}: must be {wanted}"))
    }
}

/// What `/set` changes: the sampler's parameters and the reply's length.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub sampler: SamplerParams,
    pub n_predict: usize,
}

impl Settings {
    /// Applies `setting`; `n_ctx` bounds `repeat_last_n`. The error says why it was refused.
    pub fn apply(&mut self, setting: Setting, n_ctx: usize) -> Result<(), String> {
        let mut p = self.sampler;
        match setting {
            Setting::Temperature(t) => p.temperature = t,
            Setting::TopK(k) => p.top_k = k,
            Setting::TopP(v) => p.top_p = v,
            Setting::MinP(v) => p.min_p = v,
            Setting::RepeatPenalty(r) => p.penalties.repeat = r,
            Setting::RepeatLastN(n) if n > n_ctx => {
                return Err(format!(
                    "repeat_last_n {n}: must be at most the context, {n_ctx} tokens"
                ));
            }
            Setting::RepeatLastN(n) => p.penalties.last_n = n,
            Setting::Seed(s) => p.seed = s,
            Setting::NumPredict(n) => self.n_predict = n,
        }
        p.validate().map_err(|e| e.to_string())?;
        self.sampler = p;
        Ok(())
    }

    /// The values, one `name value` a line.
    pub fn show(&self) -> String {
        let p = &self.sampler;
        format!(
            "temperature {}\ntop_k {}\ntop_p {}\nmin_p {}\nrepeat_penalty {}\nrepeat_last_n {}\n\
             seed {}\nnum_predict {}",
            p.temperature,
            p.top_k,
            p.top_p,
            p.min_p,
            p.penalties.repeat,
            p.penalties.last_n,
            p.seed,
            self.n_predict
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_that_are_commands() {
        assert_eq!(parse("hello"), None);
        assert_eq!(parse(" /bye "), Some(Ok(Command::Bye)));
        assert_eq!(parse("/clear"), Some(Ok(Command::Clear)));
        assert_eq!(
            parse("/set temperature 0.5"),
            Some(Ok(Command::Set(Setting::Temperature(0.5))))
        );
        assert_eq!(
            parse("/set top-k 20"),
            Some(Ok(Command::Set(Setting::TopK(20))))
        );
        assert!(matches!(parse("/usr/bin"), Some(Err(e)) if e.contains("unknown command")));
        assert!(matches!(parse("/set temperature"), Some(Err(e)) if e.contains("usage")));
        assert!(matches!(parse("/bye now"), Some(Err(_))));
    }

    /// Values that do not parse are refused by `parse`; values that parse but are out of
    /// range by `apply` (the check every command shares), which then changes nothing.
    #[test]
    fn impossible_values_are_refused() {
        for bad in [
            "repeat_last_n -1",
            "seed -1",
            "num_predict 0",
            "top_k 1.5",
            "temperature warm",
            "colour 3",
        ] {
            let line = format!("/set {bad}");
            assert!(matches!(parse(&line), Some(Err(_))), "{line}");
        }
        let mut settings = Settings {
            sampler: SamplerParams::default(),
            n_predict: 8,
        };
        let before = settings.show();
        for bad in [
            "temperature -1",
            "temperature nan",
            "temperature inf",
            "top_k -5",
            "top_p 2",
            "min_p -0.5",
            "repeat_penalty 0",
            "repeat_penalty nan",
        ] {
            let line = format!("/set {bad}");
            let Some(Ok(Command::Set(setting))) = parse(&line) else {
                panic!("{line} does not parse");
            };
            let err = settings.apply(setting, 64).unwrap_err();
            assert!(err.contains("is out of range"), "{line}: {err}");
            assert_eq!(settings.show(), before, "{line} changed a value");
        }
        assert!(settings.apply(Setting::RepeatLastN(65), 64).is_err());
        settings.apply(Setting::RepeatLastN(64), 64).unwrap();
        settings.apply(Setting::NumPredict(3), 64).unwrap();
        assert!(settings.show().contains("repeat_last_n 64\n"));
        assert!(settings.show().ends_with("num_predict 3"));
    }
}
