//! Where llama.cpp computes: the compute devices this build registered (the CPU, and a GPU
//! when toolrail was built with the `cuda`, `vulkan` or `metal` feature) and how many of a
//! model's layers went to the GPU. The app, the CLI and every transcript show it, because a
//! different backend computes slightly different logits (never a different mask).
#![allow(unsafe_code)]

use std::ffi::CStr;

use serde::{Deserialize, Serialize};

/// The GPU backends compiled into this build (`cargo build --features vulkan`, …), by
/// llama.cpp's name for them; empty in the default CPU build.
pub const GPU_BACKENDS: &[&str] = &[
    #[cfg(feature = "cuda")]
    "CUDA",
    #[cfg(feature = "vulkan")]
    "Vulkan",
    #[cfg(feature = "metal")]
    "Metal",
];

/// What kind of device llama.cpp says a device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    /// The CPU (always there).
    Cpu,
    /// A discrete GPU.
    Gpu,
    /// An integrated GPU (sharing the host's memory).
    IntegratedGpu,
    /// An accelerator used beside the CPU (BLAS, AMX): holds no layers.
    Accelerator,
    /// A kind this build of toolrail does not know.
    Other,
}

/// One compute device llama.cpp registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeDevice {
    /// llama.cpp's name for it (`CPU`, `Vulkan0`, `CUDA0`, `MTL0`).
    pub name: String,
    /// The driver's description (`llvmpipe (LLVM 15.0.6, 256 bits)`, `NVIDIA H200`).
    pub description: String,
    /// Its kind.
    pub kind: DeviceKind,
}

impl ComputeDevice {
    /// Whether llama.cpp puts model layers on it (a GPU, integrated or not).
    pub fn holds_layers(&self) -> bool {
        matches!(self.kind, DeviceKind::Gpu | DeviceKind::IntegratedGpu)
    }
}

/// The devices llama.cpp registered, in its order (the backend is initialised first).
pub fn devices() -> Vec<ComputeDevice> {
    if crate::backend().is_err() {
        return Vec::new();
    }
    let count = unsafe { llama_cpp_sys_2::ggml_backend_dev_count() };
    (0..count)
        .filter_map(|i| {
            // SAFETY: `i` is below the count llama.cpp just gave; devices live for the
            // process, and their name and description are NUL-terminated strings it owns.
            let dev = unsafe { llama_cpp_sys_2::ggml_backend_dev_get(i) };
            if dev.is_null() {
                return None;
            }
            let text = |p: *const std::os::raw::c_char| match p.is_null() {
                true => String::new(),
                false => unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned(),
            };
            let kind = match unsafe { llama_cpp_sys_2::ggml_backend_dev_type(dev) } {
                llama_cpp_sys_2::GGML_BACKEND_DEVICE_TYPE_CPU => DeviceKind::Cpu,
                llama_cpp_sys_2::GGML_BACKEND_DEVICE_TYPE_GPU => DeviceKind::Gpu,
                llama_cpp_sys_2::GGML_BACKEND_DEVICE_TYPE_IGPU => DeviceKind::IntegratedGpu,
                llama_cpp_sys_2::GGML_BACKEND_DEVICE_TYPE_ACCEL => DeviceKind::Accelerator,
                _ => DeviceKind::Other,
            };
            Some(ComputeDevice {
                name: text(unsafe { llama_cpp_sys_2::ggml_backend_dev_name(dev) }),
                description: text(unsafe { llama_cpp_sys_2::ggml_backend_dev_description(dev) }),
                kind,
            })
        })
        .collect()
}

/// Where a loaded model's layers are: what the app's model line, the CLI's stderr and each
/// transcript say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The GPU that holds layers (llama.cpp's first GPU device), None on a CPU-only build or
    /// machine.
    pub gpu: Option<ComputeDevice>,
    /// The layers asked for (`gpu_layers`).
    pub requested_layers: u32,
    /// The layers on the GPU: llama.cpp's count (the repeating layers and the output layer).
    pub offloaded_layers: u32,
    /// The model's layers as llama.cpp counts them for offload (its blocks + the output).
    pub offloadable_layers: u32,
}

impl Placement {
    /// Where `requested` layers of a model with `blocks` repeating layers go on this build
    /// and machine: llama.cpp offloads `min(requested, blocks + 1)` when it has a GPU.
    pub fn of(requested: u32, blocks: u32) -> Placement {
        let gpu = devices().into_iter().find(ComputeDevice::holds_layers);
        let offloadable_layers = blocks.saturating_add(1);
        Placement {
            offloaded_layers: match gpu {
                Some(_) => requested.min(offloadable_layers),
                None => 0,
            },
            gpu,
            requested_layers: requested,
            offloadable_layers,
        }
    }

    /// The backend that computes the layers: the GPU's name when it holds any, else `CPU`.
    pub fn backend(&self) -> String {
        match &self.gpu {
            Some(gpu) if self.offloaded_layers > 0 => gpu.name.clone(),
            _ => "CPU".to_owned(),
        }
    }

    /// One line: `CPU`, `Vulkan0 (llvmpipe …): 19/19 layers`, or why asked-for layers stay
    /// on the CPU.
    pub fn summary(&self) -> String {
        match (&self.gpu, self.requested_layers) {
            (Some(gpu), n) if n > 0 => format!(
                "{} ({}): {}/{} layers",
                gpu.name, gpu.description, self.offloaded_layers, self.offloadable_layers
            ),
            (Some(gpu), _) => format!("CPU (GPU {} not used: gpu_layers is 0)", gpu.name),
            (None, n) if n > 0 && GPU_BACKENDS.is_empty() => format!(
                "CPU (gpu_layers {n} ignored: this build has no GPU backend; build with \
                 --features cuda, vulkan or metal)"
            ),
            (None, n) if n > 0 => format!(
                "CPU (gpu_layers {n} ignored: no {} device found)",
                GPU_BACKENDS.join("/")
            ),
            (None, _) => "CPU".to_owned(),
        }
    }
}

/// llama.cpp's own count of offloaded layers, from its load log line
/// (`load_tensors: offloaded 19/19 layers to GPU`): (offloaded, offloadable).
pub(crate) fn offloaded_in_log(line: &str) -> Option<(u32, u32)> {
    let rest = line.split("offloaded ").nth(1)?;
    let (counts, tail) = rest.split_once(' ')?;
    if !tail.starts_with("layers to GPU") {
        return None;
    }
    let (done, of) = counts.split_once('/')?;
    Some((done.parse().ok()?, of.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_llama_cpps_offload_line() {
        assert_eq!(
            offloaded_in_log("load_tensors: offloaded 19/19 layers to GPU"),
            Some((19, 19))
        );
        assert_eq!(
            offloaded_in_log("load_tensors: offloaded 0/19 layers to GPU"),
            Some((0, 19))
        );
        assert_eq!(
            offloaded_in_log("load_tensors: CPU model buffer size"),
            None
        );
    }

    #[test]
    fn a_cpu_build_keeps_every_layer_on_the_cpu_and_says_why() {
        let placement = Placement::of(99, 18);
        if GPU_BACKENDS.is_empty() {
            assert_eq!(placement.offloaded_layers, 0);
            assert_eq!(placement.backend(), "CPU");
            assert!(
                placement.summary().contains("no GPU backend"),
                "{}",
                placement.summary()
            );
        }
        assert_eq!(placement.offloadable_layers, 19);
        assert_eq!(Placement::of(0, 18).offloaded_layers, 0);
    }
}
