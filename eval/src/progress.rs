//! Progress bars for the long phases, drawn only when stderr is a terminal.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Makes progress bars, or hidden ones when there is no terminal (CI logs, tests, pipes).
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    visible: bool,
}

impl Progress {
    /// Bars drawn when stderr is a terminal.
    pub fn for_terminal() -> Self {
        Self {
            visible: std::io::stderr().is_terminal(),
        }
    }

    /// Bars never drawn.
    pub fn hidden() -> Self {
        Self { visible: false }
    }

    /// A bar of `total` steps named `phase`.
    pub fn bar(&self, phase: &str, total: u64) -> ProgressBar {
        if !self.visible {
            return ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        }
        let bar = ProgressBar::new(total);
        let style =
            ProgressStyle::with_template("{msg:>14} [{bar:40}] {pos}/{len} {elapsed}/{eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(phase.to_owned());
        bar
    }
}
