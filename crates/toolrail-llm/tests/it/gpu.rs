//! llama.cpp's GPU backends on the real test model. In a build with one (`--features vulkan`,
//! `cuda` or `metal`): the layers go where `gpu_layers` says (llama.cpp's own count), a
//! grammar-constrained generation runs on the GPU, and at every step its mask equals the mask
//! toolrail and llama.cpp compute on the CPU for the same tokens. In the default CPU build:
//! layers asked for stay on the CPU, the placement says why, and the same generation's masks
//! are checked the same way.
//!
//! The suite runs this module in both builds: the CPU one, and the Vulkan one on Mesa's
//! software Vulkan (lavapipe), where a build with a GPU backend that finds no device fails.

use std::sync::Arc;

use toolrail_llm::device::{self, GPU_BACKENDS, Placement};
use toolrail_llm::record::{Stop, TokenRecord};
use toolrail_llm::worker::{Command, EngineKind, Worker};
use toolrail_llm::{Model, ModelSpec, SessionOptions};

use crate::common::masks::{MaskPair, differing_tokens};

/// The test model with `layers` on the GPU.
fn load(layers: u32) -> Option<Model> {
    let path = crate::common::model_path()?;
    let spec = ModelSpec {
        gpu_layers: layers,
        ..ModelSpec::from_path(path)
    };
    Some(Model::load(spec, |_| true).unwrap())
}

#[test]
fn layers_go_where_gpu_layers_says() {
    let Some(cpu) = load(0) else { return };
    let blocks = cpu.info().layers;
    let on_cpu = &cpu.info().placement;
    assert_eq!(on_cpu.offloaded_layers, 0, "{}", on_cpu.summary());
    assert_eq!(on_cpu.backend(), "CPU");
    assert_eq!(on_cpu.offloadable_layers, blocks + 1);

    let all = load(999).unwrap();
    let placement = &all.info().placement;
    eprintln!("devices: {:?}", device::devices());
    eprintln!("gpu_layers 999: {}", placement.summary());
    if GPU_BACKENDS.is_empty() {
        assert!(placement.gpu.is_none());
        assert_eq!(placement.offloaded_layers, 0);
        assert!(
            placement
                .summary()
                .contains("this build has no GPU backend"),
            "{}",
            placement.summary()
        );
        return;
    }
    let gpu = placement.gpu.as_ref().unwrap_or_else(|| {
        panic!(
            "built with {GPU_BACKENDS:?}, but llama.cpp found no GPU device (devices: {:?}; on \
             lavapipe set GGML_VK_VISIBLE_DEVICES=0)",
            device::devices()
        )
    });
    assert!(gpu.holds_layers());
    assert_eq!(placement.backend(), gpu.name);
    // llama.cpp's log says every layer, and the rule toolrail mirrors says the same
    assert_eq!(
        placement.offloaded_layers,
        blocks + 1,
        "{}",
        placement.summary()
    );
    assert_eq!(Placement::of(999, blocks), *placement);
    let some = load(5).unwrap();
    assert_eq!(some.info().placement.offloaded_layers, 5);
    assert_eq!(Placement::of(5, blocks), some.info().placement);
}

/// A greedy run of the weather tool call under its grammar on `model`: its token records, stop
/// and output.
fn run(model: &Model, prompt: &str, grammar: &str) -> (Vec<TokenRecord>, Stop, String) {
    let worker = Worker::spawn(model.clone(), Arc::new(|| {}));
    let request = crate::common::run_request(prompt, Some(grammar), EngineKind::Toolrail, 48);
    worker.send(Command::Start(Box::new(request)));
    crate::gguf_templates::collect(&worker)
}

#[test]
fn generation_on_the_gpu_keeps_the_cpus_masks() {
    let Some(gpu) = load(999) else { return };
    let cpu = load(0).unwrap();
    let (prompt, grammar) = crate::common::weather_prompt_and_grammar();
    let (tokens, stop, output) = run(&gpu, &prompt, &grammar);
    eprintln!(
        "{} run: {} tokens, stop {stop:?}: {output:?}",
        gpu.info().placement.summary(),
        tokens.len()
    );
    assert!(!tokens.is_empty(), "the run took no token");
    // the settings a run records (its `Started` event) say where it computes
    let session = gpu.session(SessionOptions::default()).unwrap();
    assert_eq!(
        session.settings().placement.as_ref(),
        Some(&gpu.info().placement),
        "the run's settings say where it computes"
    );
    drop(session);

    // the CPU follows the GPU run's tokens: toolrail's and llama.cpp's masks at each step
    let mut pair = MaskPair::new(&cpu, &grammar, &prompt, 1024);
    let mut agreeing_choices = 0;
    for (step, record) in tokens.iter().enumerate() {
        let (ours, theirs) = pair.masks();
        assert_eq!(
            differing_tokens(&ours, &theirs, &format!("step {step}")),
            0,
            "toolrail's and llama.cpp's CPU masks differ at step {step}"
        );
        assert_eq!(
            record.allowed as usize,
            ours.count(),
            "step {step}: the run's mask allowed {} tokens, the CPU's {}",
            record.allowed,
            ours.count()
        );
        assert!(
            ours.contains(record.id),
            "step {step}: the run took {} ({:?}), which the CPU's mask forbids",
            record.id,
            record.piece
        );
        for candidate in &record.after {
            assert!(
                ours.contains(candidate.id),
                "step {step}: candidate {} after the mask is forbidden on the CPU",
                candidate.id
            );
        }
        // the CPU's own greedy choice under the same mask (logits differ by rounding only)
        let logits = pair.session.logits().unwrap();
        let best = ours
            .iter()
            .max_by(|&a, &b| logits[a as usize].total_cmp(&logits[b as usize]))
            .unwrap();
        agreeing_choices += usize::from(best == record.id);
        if cpu.is_eog(record.id) {
            break;
        }
        pair.llama.accept(record.id).unwrap();
        pair.state = pair
            .engine
            .accept_token(pair.state, record.id, &cpu.piece(record.id))
            .unwrap();
        pair.session.feed(record.id).unwrap();
    }
    eprintln!(
        "the CPU's greedy choice agreed with the run's at {agreeing_choices} of {} steps",
        tokens.len()
    );
    if stop == Stop::EndOfGeneration {
        let g = Arc::new(toolrail_gbnf::Grammar::parse(&grammar).unwrap());
        assert!(
            toolrail_engine::check(&g, output.as_bytes()).is_accepted(),
            "{output:?}"
        );
    }
}
