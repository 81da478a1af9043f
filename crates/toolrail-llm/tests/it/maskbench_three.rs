//! `bench masks` with all three engines on a small seeded draw of MaskBench schemas, on the
//! real test model: every position is counted once, llama.cpp computes exactly the positions
//! its per-schema cap draws (all of them without a cap), the compared counts are the positions
//! where both masks exist, and toolrail and llama.cpp (the same GBNF) never differ.

use toolrail_llm::bench_masks::{
    MaskBenchOptions, MaskBenchReport, MaskEngineFigures, bench_masks,
};
use toolrail_llm::engine_kind::EngineKind;

fn figures(report: &MaskBenchReport, kind: EngineKind) -> &MaskEngineFigures {
    report
        .engines
        .iter()
        .find(|e| e.engine == kind)
        .unwrap_or_else(|| panic!("no {} figures", kind.name()))
}

const ALL: [EngineKind; 3] = [
    EngineKind::Toolrail,
    EngineKind::Llguidance,
    EngineKind::Llama,
];

/// The counts every report must satisfy.
fn check_counts(report: &MaskBenchReport) {
    let names: Vec<&str> = report.engines.iter().map(|e| e.engine.name()).collect();
    assert_eq!(names, ["toolrail", "llguidance", "llama"]);
    assert!(
        report.positions > 0 && report.positions <= report.tokens,
        "{report:?}"
    );
    for e in &report.engines {
        assert!(
            e.mask_ms.count + e.positions_skipped <= report.positions,
            "{report:?}"
        );
        assert!(e.compiled <= report.schemas);
    }
    let toolrail = figures(report, EngineKind::Toolrail);
    let llama = figures(report, EngineKind::Llama);
    let llguidance = figures(report, EngineKind::Llguidance);
    assert_eq!(toolrail.positions_skipped, 0);
    assert_eq!(llguidance.positions_skipped, 0);
    // the same GBNF: toolrail computed wherever llama.cpp did, and they agree there
    assert_eq!(
        report.toolrail_llama_compared, llama.mask_ms.count,
        "{report:?}"
    );
    assert_eq!(
        report.toolrail_llama_differences, 0,
        "{:?}",
        report.llama_examples
    );
    assert!(
        report.toolrail_llguidance_compared <= toolrail.mask_ms.count.min(llguidance.mask_ms.count)
    );
    assert!(report.toolrail_llguidance_differences <= report.toolrail_llguidance_compared);
    assert_eq!(
        llama.compiled + report.llama_not_run,
        report.schemas,
        "{report:?}"
    );
}

#[test]
fn bench_masks_runs_three_engines_and_its_counts_add_up() {
    let (Some(model), Some(dir)) = (
        crate::common::model(),
        toolrail_testkit::corpus("maskbench"),
    ) else {
        return;
    };
    let run = |llama_positions| {
        bench_masks(
            model,
            &MaskBenchOptions {
                dir: dir.clone(),
                engines: ALL.to_vec(),
                limit: Some(3),
                seed: 7,
                llama_positions,
            },
        )
        .unwrap()
    };
    // every position
    let full = run(None);
    check_counts(&full);
    assert_eq!(full.schemas, 3);
    let toolrail = figures(&full, EngineKind::Toolrail);
    let llama = figures(&full, EngineKind::Llama);
    assert!(llama.compiled > 0, "{full:?}");
    assert_eq!(llama.positions_skipped, 0);
    assert_eq!(llama.mask_ms.count, toolrail.mask_ms.count, "{full:?}");
    // at most 4 positions per schema: the same positions followed, fewer computed, the rest
    // followed without a mask
    let capped = run(Some(4));
    check_counts(&capped);
    assert_eq!(capped.positions, full.positions);
    assert_eq!(capped.tokens, full.tokens);
    let capped_llama = figures(&capped, EngineKind::Llama);
    assert!(
        capped_llama.mask_ms.count <= 4 * capped_llama.compiled,
        "{capped:?}"
    );
    assert!(capped_llama.mask_ms.count > 0);
    assert_eq!(
        capped_llama.mask_ms.count + capped_llama.positions_skipped,
        llama.mask_ms.count,
        "llama.cpp follows the same positions, computing only the drawn ones"
    );
    assert_eq!(capped.llama_positions, Some(4));
}
