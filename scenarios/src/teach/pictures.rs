//! The pictures of `keel teach --svg`: per sink (and view) a timeline of the crash points
//! with what each step of the fault-free run does marked under its x axis, and the timeout
//! heat map. Every label is kept inside the picture by a generous estimate of its width.

use super::{
    commits_checkpoint, t, Lang, TIMEOUT_TABLE_RESTART_DELAYS_MS, TIMEOUT_TABLE_TIMEOUTS_MS,
};
use crate::sites::SiteRow;
use crate::sweep::PointRecord;
use plotters::coord::types::{RangedCoordf64, RangedCoordu64};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use unicode_width::UnicodeWidthStr;

/// The font families of the pictures: CJK-capable ones first, so that the Chinese pictures
/// render wherever one of them is installed; any sans-serif last.
pub const FONT_FAMILIES: &str =
    "Noto Sans CJK SC, Source Han Sans SC, PingFang SC, Microsoft YaHei, WenQuanYi Micro Hei, sans-serif";

const PURPLE: RGBColor = RGBColor(112, 72, 232);
const RED: RGBColor = RGBColor(201, 42, 42);
const ORANGE: RGBColor = RGBColor(232, 89, 12);
const BLUE: RGBColor = RGBColor(59, 91, 219);
const GREEN: RGBColor = RGBColor(12, 166, 120);
const TEAL: RGBColor = RGBColor(16, 152, 173);

/// A font of the pictures; `size` as plotters takes it (it writes size / 1.24 as px).
fn font(size: f64) -> FontDesc<'static> {
    (FONT_FAMILIES, size).into_font()
}

/// A generous estimate of a text's width in pixels at plotters size `size`: a CJK character
/// counts two columns, a column 0.62 em. Used to keep labels inside the picture.
fn text_width(text: &str, size: f64) -> i32 {
    (text.width() as f64 * 0.62 * size / 1.24).ceil() as i32
}

fn anchored(size: f64, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle::from(font(size)).pos(Pos::new(h, v))
}

/// One row of marks under a timeline: steps of the fault-free run doing one kind of thing.
struct Lane {
    name: &'static str,
    colour: RGBColor,
    /// Step, and a label to write after its mark.
    marks: Vec<(u64, Option<String>)>,
}

fn lanes(sites: &[SiteRow], lang: Lang) -> Vec<Lane> {
    let is_checkpoint_file = |s: &SiteRow| s.target.contains("state");
    let mut lanes = vec![
        Lane {
            name: t(lang, "checkpoint write", "写快照"),
            colour: ORANGE,
            marks: Vec::new(),
        },
        Lane {
            name: t(lang, "fsync", "fsync"),
            colour: BLUE,
            marks: Vec::new(),
        },
        Lane {
            name: t(lang, "sink write", "写 sink"),
            colour: PURPLE,
            marks: Vec::new(),
        },
        Lane {
            name: t(lang, "begin / commit", "开始 / 提交事务"),
            colour: GREEN,
            marks: Vec::new(),
        },
    ];
    for site in sites {
        let lane = match site.op {
            "disk.create" | "disk.write" | "disk.rename" | "disk.remove"
                if is_checkpoint_file(site) =>
            {
                0
            }
            "disk.fsync" | "disk.fsync-dir" => 1,
            "sink.write" | "log.send" => 2,
            op if op.starts_with("log.") => 3,
            _ => continue,
        };
        let label = (lane == 0 && commits_checkpoint(site))
            .then(|| site.target.rsplit(' ').next().unwrap_or("").to_string());
        lanes[lane].marks.push((site.step, label));
    }
    lanes.retain(|lane| !lane.marks.is_empty());
    lanes
}

/// The fault-free run's records on the log: (send step, commit step, ms from send to commit).
fn visibility_waits(sites: &[SiteRow]) -> Vec<(u64, u64, u64)> {
    let txn = |target: &str| target.split(' ').next().unwrap_or("").to_string();
    let mut open = String::new();
    let mut waits = Vec::new();
    for (i, site) in sites.iter().enumerate() {
        match site.op {
            "log.begin" => open = txn(&site.target),
            "log.send" => {
                let commit = sites[i + 1..]
                    .iter()
                    .find(|s| s.op == "log.commit" && txn(&s.target) == open);
                if let Some(commit) = commit {
                    waits.push((site.step, commit.step, commit.time_ms - site.time_ms));
                }
            }
            _ => {}
        }
    }
    waits
}

fn integer_label(x: &f64) -> String {
    if x.fract() == 0.0 && *x >= 0.0 {
        format!("{x:.0}")
    } else {
        String::new()
    }
}

const WIDTH: u32 = 900;
const LABEL_SIZE: f64 = 12.0;

pub(super) fn timeline_svg(
    title: &str,
    records: &[&PointRecord],
    sites: &[SiteRow],
    with_delay: bool,
    lang: Lang,
) -> String {
    let lanes = lanes(sites, lang);
    let waits = if with_delay {
        visibility_waits(sites)
    } else {
        Vec::new()
    };
    let steps_max = records
        .iter()
        .map(|r| r.faults[0].step)
        .chain(sites.iter().map(|s| s.step))
        .max()
        .unwrap_or(0)
        + 1;
    let delay_name = t(lang, "not yet visible", "提交前不可见");
    let left = lanes
        .iter()
        .map(|lane| lane.name)
        .chain(with_delay.then_some(delay_name))
        .map(|name| text_width(name, LABEL_SIZE))
        .max()
        .unwrap_or(0)
        .max(50)
        + 24;
    let right = if with_delay { 64 } else { 24 };
    let margin = 8;
    // The visibility waits get rows of their own, so that no two bars or labels overlap.
    let lane_h = 22;
    let header_h = 52;
    let main_h = 220;
    let plot_w = WIDTH as i32 - 2 * margin - left - right;
    let px = |step: f64| (step / steps_max as f64 * plot_w as f64).round() as i32;
    let mut wait_rows: Vec<i32> = Vec::new();
    let mut placed_waits = Vec::new();
    for &(send, commit, ms) in &waits {
        let label = format!("{ms} ms");
        let (from, to) = (px(send as f64 + 0.2), px(commit as f64 + 0.8));
        let width = 3 + text_width(&label, LABEL_SIZE);
        // The label right of the bar where it fits in the picture, else left of it.
        let right_side = to + width <= plot_w || from - width < 0;
        let (start, end) = if right_side {
            (from, to + width)
        } else {
            (from - width, to)
        };
        let row = match wait_rows.iter().position(|&last| last + 6 < start) {
            Some(row) => row,
            None => {
                wait_rows.push(i32::MIN);
                wait_rows.len() - 1
            }
        };
        wait_rows[row] = end;
        placed_waits.push((send, commit, label, row, right_side));
    }
    let rows = lanes.len() + wait_rows.len();
    let lanes_h = rows as i32 * lane_h + 56;
    let height = (header_h + main_h + lanes_h) as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).expect("drawing to a string");
        let (header, rest) = root.split_vertically(header_h);
        let (main, lower) = rest.split_vertically(main_h);

        // The title, shrunk until it fits, and the legend under it.
        let mut size = 18.0;
        while text_width(title, size) > WIDTH as i32 - 2 * margin && size > 8.0 {
            size -= 1.0;
        }
        header
            .draw(&Text::new(
                title.to_string(),
                (WIDTH as i32 / 2, 6),
                anchored(size, HPos::Center, VPos::Top),
            ))
            .expect("a title");
        let mut legend: Vec<(&str, RGBColor, bool)> = vec![
            (t(lang, "duplicates", "重复"), PURPLE, false),
            (t(lang, "lost", "丢失"), RED, false),
            (t(lang, "checkpoint committed", "快照提交"), ORANGE, true),
        ];
        if with_delay {
            legend.push((
                t(
                    lang,
                    "longest visibility delay (ms, right axis)",
                    "最长可见延迟（ms，右轴）",
                ),
                TEAL,
                true,
            ));
        }
        let mut x = margin + left;
        for (name, colour, line) in legend {
            let y = 38;
            if line {
                header
                    .draw(&PathElement::new(
                        [(x, y), (x + 14, y)],
                        colour.stroke_width(2),
                    ))
                    .expect("a legend line");
            } else {
                header
                    .draw(&Rectangle::new(
                        [(x + 2, y - 5), (x + 12, y + 5)],
                        colour.filled(),
                    ))
                    .expect("a legend box");
            }
            header
                .draw(&Text::new(
                    name.to_string(),
                    (x + 20, y),
                    anchored(LABEL_SIZE, HPos::Left, VPos::Center),
                ))
                .expect("a legend label");
            x += 20 + text_width(name, LABEL_SIZE) + 18;
        }

        let y_max = records
            .iter()
            .map(|r| r.duplicates.max(r.lost))
            .max()
            .unwrap_or(0)
            .max(1)
            + 1;
        let x_range = 0f64..steps_max as f64;
        let mut builder = ChartBuilder::on(&main);
        builder
            .margin_left(margin)
            .margin_top(6)
            .x_label_area_size(0)
            .y_label_area_size(left);
        if with_delay {
            builder.margin_right(margin).right_y_label_area_size(right);
        } else {
            builder.margin_right(margin + right);
        }
        let chart = builder
            .build_cartesian_2d(x_range.clone(), 0u64..y_max)
            .expect("a chart");
        let checkpoints: Vec<(u64, &str)> = lanes
            .iter()
            .flat_map(|lane| &lane.marks)
            .filter_map(|(step, label)| label.as_deref().map(|l| (*step, l)))
            .collect();
        if with_delay {
            let ms_max = records
                .iter()
                .map(|r| r.visibility_delay_ms_max)
                .max()
                .unwrap_or(0)
                .max(1);
            let mut chart =
                chart.set_secondary_coord(x_range.clone(), 0u64..ms_max + ms_max / 5 + 1);
            draw_counts(&mut chart, &root, records, y_max, &checkpoints, lang);
            chart
                .configure_secondary_axes()
                .y_desc(t(
                    lang,
                    "longest visibility delay (ms)",
                    "最长可见延迟 (ms)",
                ))
                .label_style(font(LABEL_SIZE))
                .axis_desc_style(font(LABEL_SIZE))
                .draw()
                .expect("a right axis");
            let mut points: Vec<(f64, u64)> = records
                .iter()
                .map(|r| (r.faults[0].step as f64 + 0.5, r.visibility_delay_ms_max))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_secondary_series(LineSeries::new(points, TEAL.stroke_width(2)))
                .expect("visibility delays");
        } else {
            let mut chart = chart;
            draw_counts(&mut chart, &root, records, y_max, &checkpoints, lang);
        }

        let mut strip = ChartBuilder::on(&lower)
            .margin_left(margin)
            .margin_top(4)
            .margin_bottom(6)
            .x_label_area_size(46)
            .y_label_area_size(left)
            .margin_right(margin + right)
            .build_cartesian_2d(x_range, 0f64..rows as f64)
            .expect("a strip");
        strip
            .configure_mesh()
            .disable_mesh()
            .disable_y_axis()
            .x_labels(16)
            .x_label_formatter(&integer_label)
            .x_desc(t(
                lang,
                "crash point (step of the fault-free run)",
                "崩溃点（无故障运行的步骤）",
            ))
            .label_style(font(LABEL_SIZE))
            .axis_desc_style(font(LABEL_SIZE))
            .draw()
            .expect("a strip axis");
        let area = strip.plotting_area();
        let (x_pixels, _) = area.get_pixel_range();
        let top = |row: usize| (rows - row) as f64;
        let name_at = |row: usize, name: &str| {
            let (_, y) = strip.backend_coord(&(0.0, top(row) - 0.5));
            root.draw(&Text::new(
                name.to_string(),
                (x_pixels.start - 8, y),
                anchored(LABEL_SIZE, HPos::Right, VPos::Center),
            ))
            .expect("a lane name");
        };
        // A label after `x` (or before it, where it would leave the picture).
        // A label right of `x_after`, or left of `x_before`.
        let label_at = |text: &str, (x_after, x_before): (f64, f64), y: f64, right_side: bool| {
            let (x, h) = if right_side {
                (strip.backend_coord(&(x_after, y)).0 + 3, HPos::Left)
            } else {
                (strip.backend_coord(&(x_before, y)).0 - 3, HPos::Right)
            };
            let y = strip.backend_coord(&(x_after, y)).1;
            root.draw(&Text::new(
                text.to_string(),
                (x, y),
                anchored(LABEL_SIZE, h, VPos::Center).color(&TEAL),
            ))
            .expect("a wait label");
        };
        for (row, lane) in lanes.iter().enumerate() {
            name_at(row, lane.name);
            let y0 = top(row) - 1.0;
            for (step, _) in &lane.marks {
                let x = *step as f64;
                area.draw(&Rectangle::new(
                    [(x + 0.15, y0 + 0.2), (x + 0.85, y0 + 0.8)],
                    lane.colour.filled(),
                ))
                .expect("a lane mark");
            }
        }
        if !placed_waits.is_empty() {
            name_at(lanes.len(), delay_name);
        }
        for (send, commit, label, row, right_side) in &placed_waits {
            let y0 = top(lanes.len() + row) - 1.0;
            let (from, to) = (*send as f64 + 0.5, *commit as f64 + 0.5);
            for (a, b, y_from, y_to, colour) in [
                (from, to, 0.35, 0.65, TEAL),
                (from - 0.3, from + 0.3, 0.15, 0.85, PURPLE),
                (to - 0.3, to + 0.3, 0.15, 0.85, GREEN),
            ] {
                area.draw(&Rectangle::new(
                    [(a, y0 + y_from), (b, y0 + y_to)],
                    colour.filled(),
                ))
                .expect("a visibility wait");
            }
            label_at(label, (to + 0.3, from - 0.3), y0 + 0.5, *right_side);
        }
        root.present().expect("drawing to a string");
    }
    svg
}

type Counts<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordu64>>;

/// Duplicates and losses per crash point (side by side where a point has both), and a line
/// at each checkpoint the fault-free run commits, named at the top of the chart.
fn draw_counts(
    chart: &mut Counts<'_, '_>,
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    records: &[&PointRecord],
    y_max: u64,
    checkpoints: &[(u64, &str)],
    lang: Lang,
) {
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_labels(y_max as usize + 1)
        .y_desc(t(lang, "records", "条数"))
        .label_style(font(LABEL_SIZE))
        .axis_desc_style(font(LABEL_SIZE))
        .draw()
        .expect("a mesh");
    let (x_pixels, _) = chart.plotting_area().get_pixel_range();
    let mut free_from = i32::MIN;
    for &(step, label) in checkpoints {
        let x = step as f64 + 0.5;
        chart
            .draw_series(LineSeries::new(
                [(x, 0), (x, y_max)],
                ORANGE.mix(0.7).stroke_width(1),
            ))
            .expect("a checkpoint line");
        // The name right of the line, or left of it near the right edge; skipped where it
        // would run into the previous one.
        let (line_x, top_y) = chart.backend_coord(&(x, y_max));
        let width = text_width(label, LABEL_SIZE);
        let (start, anchor, h) = if line_x + 4 + width <= x_pixels.end {
            (line_x + 4, line_x + 4, HPos::Left)
        } else {
            (line_x - 4 - width, line_x - 4, HPos::Right)
        };
        if start > free_from && start >= x_pixels.start {
            root.draw(&Text::new(
                label.to_string(),
                (anchor, top_y + 4),
                anchored(LABEL_SIZE, h, VPos::Top),
            ))
            .expect("a checkpoint name");
            free_from = start + width + 6;
        }
    }
    for r in records {
        let x = r.faults[0].step as f64;
        let (dup_to, lost_from) = if r.duplicates > 0 && r.lost > 0 {
            (x + 0.5, x + 0.5)
        } else {
            (x + 1.0, x)
        };
        if r.duplicates > 0 {
            chart
                .draw_series([Rectangle::new(
                    [(x, 0), (dup_to, r.duplicates)],
                    PURPLE.filled(),
                )])
                .expect("duplicates");
        }
        if r.lost > 0 {
            chart
                .draw_series([Rectangle::new(
                    [(lost_from, 0), (x + 1.0, r.lost)],
                    RED.filled(),
                )])
                .expect("losses");
        }
    }
}

/// The label of a segment's centre: the value of that row or column, in ms.
fn segment_label(value: &SegmentValue<usize>, values_ms: &[u64]) -> String {
    match value {
        SegmentValue::CenterOf(i) => values_ms.get(*i).map_or(String::new(), |ms| ms.to_string()),
        _ => String::new(),
    }
}

pub(super) fn heatmap_svg(losses: &[Vec<u64>], lang: Lang) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 420)).into_drawing_area();
        root.fill(&WHITE).expect("drawing to a string");
        let rows = losses.len();
        let cols = losses.first().map_or(0, Vec::len);
        let max = losses.iter().flatten().copied().max().unwrap_or(0).max(1);
        let mut chart = ChartBuilder::on(&root)
            .caption(
                t(
                    lang,
                    "crash points losing records (read_committed)",
                    "read_committed 丢数的崩溃点",
                ),
                font(18.0),
            )
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(84)
            .build_cartesian_2d(
                (0..cols - 1).into_segmented(),
                (0..rows - 1).into_segmented(),
            )
            .expect("a chart");
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(t(lang, "transaction timeout (ms)", "事务超时 (ms)"))
            .y_desc(t(lang, "restart delay (ms)", "重启时长 (ms)"))
            .x_labels(cols)
            .y_labels(rows)
            .x_label_formatter(&|x| segment_label(x, &TIMEOUT_TABLE_TIMEOUTS_MS))
            .y_label_formatter(&|y| segment_label(y, &TIMEOUT_TABLE_RESTART_DELAYS_MS))
            .label_style(font(LABEL_SIZE))
            .axis_desc_style(font(LABEL_SIZE))
            .draw()
            .expect("a mesh");
        for (r, row) in losses.iter().enumerate() {
            for (c, &lost) in row.iter().enumerate() {
                let heat = (lost * 200 / max) as u8;
                let colour = RGBColor(255, 255 - heat, 255 - heat);
                let corner = |c, r| (SegmentValue::Exact(c), SegmentValue::Exact(r));
                for style in [colour.filled(), RGBColor(200, 200, 200).stroke_width(1)] {
                    chart
                        .draw_series([Rectangle::new([corner(c, r), corner(c + 1, r + 1)], style)])
                        .expect("a cell");
                }
                let centre = (SegmentValue::CenterOf(c), SegmentValue::CenterOf(r));
                chart
                    .draw_series([Text::new(
                        lost.to_string(),
                        centre,
                        anchored(16.0, HPos::Center, VPos::Center),
                    )])
                    .expect("a cell label");
            }
        }
        root.present().expect("drawing to a string");
    }
    svg
}
