//! The summary's rows: one figure, what it is compared with, its target and the verdict, judged
//! here by the same rules for every bench, printed by a bench as one `bench-row` line and read
//! back by `cargo xtask bench`, which writes them all into one table.

use std::fmt;

/// The unit a figure is shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Milliseconds.
    Ms,
    /// Microseconds.
    Us,
    /// KiB, shown in MiB.
    Kib,
}

impl Unit {
    /// Returns `value` shown in this unit.
    pub fn show(self, value: f64) -> String {
        match self {
            Self::Ms => format!("{value:.3} ms"),
            Self::Us => format!("{value:.1} µs"),
            Self::Kib => format!("{:.2} MiB", value / 1024.0),
        }
    }
}

/// One row of the summary table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The section of `cargo xtask bench --only SECTION`.
    pub section: String,
    /// What was measured.
    pub label: String,
    /// The figure, a median.
    pub median: String,
    /// What it is compared with, measured in the same run, if anything.
    pub reference: String,
    /// The figure over the reference, or what else the verdict rests on.
    pub ratio: String,
    /// What it must meet.
    pub target: String,
    /// Whether it met it.
    pub met: bool,
}

const PREFIX: &str = "bench-row";

impl Row {
    fn new(section: &str, label: &str, median: String) -> Self {
        Self {
            section: section.to_owned(),
            label: label.to_owned(),
            median,
            reference: String::new(),
            ratio: String::new(),
            target: String::new(),
            met: false,
        }
    }

    /// A figure whose target is at most `max` times its floor `(what, value)`.
    pub fn ratio(
        (section, label): (&str, &str),
        unit: Unit,
        value: f64,
        (what, floor): (&str, f64),
        max: f64,
    ) -> Self {
        let ratio = value / floor;
        Self {
            reference: format!("{what} {}", unit.show(floor)),
            ratio: format!("{ratio:.2}×"),
            target: format!("≤ {max}×"),
            met: ratio <= max,
            ..Self::new(section, label, unit.show(value))
        }
    }

    /// A figure whose target is at most `max`, in its unit; the reference is shown only.
    pub fn at_most(
        (section, label): (&str, &str),
        unit: Unit,
        value: f64,
        reference: Option<(&str, f64)>,
        max: f64,
    ) -> Self {
        let mut row = Self::new(section, label, unit.show(value));
        if let Some((what, floor)) = reference {
            row.reference = format!("{what} {}", unit.show(floor));
            row.ratio = format!("{:.2}×", value / floor);
        }
        Self { target: format!("≤ {}", unit.show(max)), met: value <= max, ..row }
    }

    /// A figure whose target is to add at most `max` to its floor `(what, value)`.
    pub fn added(
        (section, label): (&str, &str),
        unit: Unit,
        value: f64,
        (what, floor): (&str, f64),
        max: f64,
    ) -> Self {
        Self {
            reference: format!("{what} {}", unit.show(floor)),
            ratio: format!("+{}", unit.show(value - floor)),
            target: format!("≤ +{}", unit.show(max)),
            met: value - floor <= max,
            ..Self::new(section, label, unit.show(value))
        }
    }

    /// A figure shown for itself whose verdict is a check: `outcome` must meet `target`.
    pub fn check(
        (section, label): (&str, &str),
        median: String,
        outcome: String,
        target: &str,
        met: bool,
    ) -> Self {
        Self { ratio: outcome, target: target.to_owned(), met, ..Self::new(section, label, median) }
    }

    /// Reads a line printed by [`Row`]'s `Display`; `None` for any other line.
    pub fn parse(line: &str) -> Option<Self> {
        let fields: Vec<&str> =
            line.strip_prefix(PREFIX)?.strip_prefix('\t')?.split('\t').collect();
        let [section, label, median, reference, ratio, target, met] = fields.as_slice() else {
            return None;
        };
        Some(Self {
            met: match *met {
                "pass" => true,
                "MISSED" => false,
                _ => return None,
            },
            ..Self {
                reference: (*reference).to_owned(),
                ratio: (*ratio).to_owned(),
                target: (*target).to_owned(),
                ..Self::new(section, label, (*median).to_owned())
            }
        })
    }
}

impl Row {
    /// Returns `rows` as one Markdown table, a missed target in bold.
    pub fn table(rows: &[Row]) -> String {
        let mut out = String::from(
            "| section | benchmark | median | floor / reference | ratio | target | result |\n\
             | --- | --- | ---: | --- | ---: | --- | --- |\n",
        );
        for row in rows {
            let verdict = if row.met { "pass" } else { "**MISSED**" };
            let Row { section, label, median, reference, ratio, target, .. } = row;
            out += &format!(
                "| {section} | {label} | {median} | {reference} | {ratio} | {target} | {verdict} |\n"
            );
        }
        out
    }
}

/// One line: `bench-row`, then the fields, tab-separated (a field holds no tab or newline).
impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let clean = |text: &str| text.replace(['\t', '\n'], " ");
        write!(f, "{PREFIX}")?;
        for field in [&self.section, &self.label, &self.median, &self.reference, &self.ratio] {
            write!(f, "\t{}", clean(field))?;
        }
        write!(f, "\t{}\t{}", clean(&self.target), if self.met { "pass" } else { "MISSED" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_judged_and_read_back() {
        let hook = Row::ratio(("gate", "hook"), Unit::Ms, 1.5, ("floor", 1.0), 1.3);
        assert_eq!(
            (hook.ratio.as_str(), hook.target.as_str(), hook.met),
            ("1.50×", "≤ 1.3×", false)
        );
        assert_eq!(hook.reference, "floor 1.000 ms");
        let rss = Row::at_most(("gate", "rss"), Unit::Kib, 2048.0, Some(("floor", 1024.0)), 3072.0);
        assert!(rss.met && rss.median == "2.00 MiB" && rss.ratio == "2.00×", "{rss:?}");
        let call = Row::added(("runner", "call"), Unit::Us, 450.0, ("straight", 200.0), 200.0);
        assert_eq!((call.ratio.as_str(), call.met), ("+250.0 µs", false));
        for row in [hook, rss, call] {
            assert_eq!(Row::parse(&row.to_string()), Some(row));
        }
        let table = Row::table(&[Row::ratio(("gate", "hook"), Unit::Ms, 1.2, ("floor", 1.0), 1.3)]);
        assert!(
            table
                .ends_with("| gate | hook | 1.200 ms | floor 1.000 ms | 1.20× | ≤ 1.3× | pass |\n")
        );
        assert_eq!(Row::parse("bench-row\ta\tb"), None);
        assert_eq!(Row::parse("| a |"), None);
    }
}
