//! Progress bars for the long phases, drawn only when stderr is a terminal.

use std::io::IsTerminal;

use std::time::Duration;

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

    /// A spinner with the time spent, for a phase done in one call that reports no steps.
    pub fn spinner(&self, phase: &str) -> ProgressBar {
        if !self.visible {
            return ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        }
        let spinner = ProgressBar::new_spinner();
        let style = ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        spinner.set_style(style);
        spinner.set_message(phase.to_owned());
        spinner.enable_steady_tick(Duration::from_millis(200));
        spinner
    }
}
