//! Tables for reports: one value rendered as aligned text, Markdown or CSV.

use unicode_width::UnicodeWidthStr;

/// How a table is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableFormat {
    Table,
    Markdown,
    Csv,
}

/// A header and rows of cells, all text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        assert_eq!(
            row.len(),
            self.headers.len(),
            "a row has one cell per column"
        );
        self.rows.push(row);
    }

    pub fn render(&self, format: TableFormat) -> String {
        match format {
            TableFormat::Table => self.render_aligned(),
            TableFormat::Markdown => self.render_markdown(),
            TableFormat::Csv => self.render_csv(),
        }
    }

    fn render_aligned(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| r[c].width())
                    .chain([self.headers[c].width()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                // Pad by display width: a CJK character takes two columns.
                .map(|(cell, &w)| format!("{cell}{}", " ".repeat(w - cell.width())))
                .collect();
            padded.join("  ").trim_end().to_string() + "\n"
        };
        let mut out = line(&self.headers);
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }

    fn render_markdown(&self) -> String {
        let line = |cells: &[String]| {
            let escaped: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
            format!("| {} |\n", escaped.join(" | "))
        };
        let mut out = line(&self.headers);
        out.push_str(&format!("|{}\n", " --- |".repeat(self.headers.len())));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }

    fn render_csv(&self) -> String {
        let line = |cells: &[String]| {
            let quoted: Vec<String> = cells
                .iter()
                .map(|c| {
                    if c.contains([',', '"', '\n']) {
                        format!("\"{}\"", c.replace('"', "\"\""))
                    } else {
                        c.clone()
                    }
                })
                .collect();
            quoted.join(",") + "\n"
        };
        let mut out = line(&self.headers);
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_characters_take_two_columns() {
        let mut table = Table::new(&["方案", "n"]);
        table.push(vec!["幂等 sink".into(), "1".into()]);
        assert_eq!(
            table.render(TableFormat::Table),
            "方案       n\n幂等 sink  1\n"
        );
    }

    #[test]
    fn tables_render_in_every_format() {
        let mut table = Table::new(&["sink", "note"]);
        table.push(vec!["append".into(), "a|b, \"c\"".into()]);
        assert_eq!(
            table.render(TableFormat::Table),
            "sink    note\nappend  a|b, \"c\"\n"
        );
        assert_eq!(
            table.render(TableFormat::Markdown),
            "| sink | note |\n| --- | --- |\n| append | a\\|b, \"c\" |\n"
        );
        assert_eq!(
            table.render(TableFormat::Csv),
            "sink,note\nappend,\"a|b, \"\"c\"\"\"\n"
        );
    }
}
