//! What draws the app's frames: a GPU, or the CPU (software rendering). A frame drawn on the
//! CPU competes with the model for the same cores, so the live refresh during runs follows it
//! (see [`toolrail_workbench::workspace::LiveRefresh`]).

/// The renderer the window got.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Renderer {
    /// Frames are drawn by a GPU (the adapter's name).
    Gpu(String),
    /// Frames are drawn on the CPU, e.g. Mesa's llvmpipe or lavapipe (the adapter's name).
    Software(String),
    /// Not known: no window (tests, benchmarks) or a renderer that does not say.
    #[default]
    Unknown,
}

impl Renderer {
    /// The renderer of the window being created.
    pub fn of(cc: &eframe::CreationContext<'_>) -> Renderer {
        use eframe::wgpu::DeviceType;
        let Some(state) = &cc.wgpu_render_state else {
            return Renderer::Unknown;
        };
        let info = state.adapter.get_info();
        let name = if info.driver.is_empty() {
            info.name
        } else {
            format!("{} ({})", info.name, info.driver)
        };
        match info.device_type {
            DeviceType::Cpu => Renderer::Software(name),
            DeviceType::IntegratedGpu | DeviceType::DiscreteGpu | DeviceType::VirtualGpu => {
                Renderer::Gpu(name)
            }
            // Some GL drivers report no type: their names still say "llvmpipe" or "softpipe".
            DeviceType::Other if is_software_name(&name) => Renderer::Software(name),
            DeviceType::Other => Renderer::Gpu(name),
        }
    }

    /// Whether frames are drawn on the CPU.
    pub fn is_software(&self) -> bool {
        matches!(self, Renderer::Software(_))
    }
}

/// Names Mesa and others give their CPU renderers.
fn is_software_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "llvmpipe",
        "lavapipe",
        "softpipe",
        "swiftshader",
        "software",
    ]
    .iter()
    .any(|s| name.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_names_are_recognised() {
        assert!(is_software_name("llvmpipe (LLVM 15.0.7, 256 bits)"));
        assert!(is_software_name("SwiftShader Device (Subzero)"));
        assert!(!is_software_name("NVIDIA GeForce RTX 4090"));
        assert!(!Renderer::Unknown.is_software());
        assert!(Renderer::Software("llvmpipe".into()).is_software());
    }
}
