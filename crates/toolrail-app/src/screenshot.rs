//! `toolrail gui --screenshot OUT.png`: waits a few frames for the UI to settle, asks the
//! renderer for the pixels, writes them as PNG and closes the window.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Where the outcome of a screenshot is reported: `None` until it is written or failed.
pub type Outcome = Arc<Mutex<Option<Result<(), String>>>>;

/// The screenshot state machine.
pub struct Screenshot {
    path: PathBuf,
    frames: u32,
    requested: bool,
    written: Arc<Mutex<Option<Result<(), String>>>>,
    outcome: Outcome,
}

/// Frames drawn before the screenshot is requested (layout and fonts settle in the first few).
const SETTLE_FRAMES: u32 = 5;

impl Screenshot {
    /// A screenshot to be written to `path`, its outcome reported into `outcome`.
    pub fn new(path: PathBuf, outcome: Outcome) -> Self {
        Self {
            path,
            frames: 0,
            requested: false,
            written: Arc::new(Mutex::new(None)),
            outcome,
        }
    }

    /// Drives the screenshot: counts frames, requests the pixels, closes the window when written.
    pub fn logic(&mut self, ctx: &egui::Context) {
        self.frames += 1;
        if !self.requested {
            if self.frames >= SETTLE_FRAMES {
                let path = self.path.clone();
                let result = Arc::clone(&self.written);
                let repaint = ctx.clone();
                ctx.request_screenshot(move |image| {
                    let outcome = write_png(&path, &image);
                    if let Ok(mut slot) = result.lock() {
                        *slot = Some(outcome);
                    }
                    repaint.request_repaint();
                });
                self.requested = true;
            }
            ctx.request_repaint();
            return;
        }
        let done = self.written.lock().ok().and_then(|mut r| r.take());
        match done {
            Some(result) => {
                if let Ok(mut slot) = self.outcome.lock() {
                    *slot = Some(result);
                }
                ctx.send_viewport_cmd(egui::ViewportCommand::Close);
            }
            None => ctx.request_repaint(),
        }
    }
}

/// Encodes an egui image as an RGBA PNG, written atomically.
pub fn write_png(path: &std::path::Path, image: &egui::ColorImage) -> Result<(), String> {
    let [w, h] = image.size;
    let mut rgba = Vec::with_capacity(w * h * 4);
    for c in &image.pixels {
        rgba.extend_from_slice(&c.to_srgba_unmultiplied());
    }
    let mut bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut bytes, w as u32, h as u32);
        encoder.set_color(png::ColorType::Rgba);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder
            .write_header()
            .map_err(|e| format!("cannot encode the screenshot: {e}"))?;
        writer
            .write_image_data(&rgba)
            .map_err(|e| format!("cannot encode the screenshot: {e}"))?;
    }
    toolrail_workbench::fsutil::write_atomic(path, &bytes)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
