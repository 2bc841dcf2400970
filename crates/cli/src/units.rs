//! Human-readable numbers for reports.

/// Bytes with a decimal unit, as `ls -h --si` and llama.cpp print them (`253.11 MB`).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

/// A count with a decimal unit (`268.10 M`).
pub fn count(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.2} K", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2} M", n as f64 / 1e6),
        _ => format!("{:.2} B", n as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn units() {
        assert_eq!(super::bytes(999), "999 B");
        assert_eq!(super::bytes(253_113_024), "253.11 MB");
        assert_eq!(super::count(268_098_176), "268.10 M");
        assert_eq!(super::count(42), "42");
    }
}
