//! The Generation pane's prompt preview on a model whose GGUF carries a chat template: the
//! preview is llama.cpp's rendering and says where it came from.

use toolrail_llm::{Model, PromptSource};
use toolrail_workbench::run::{RunInputs, RunSetup, build_prompt_preview};

#[test]
fn the_preview_uses_the_gguf_chat_template_when_there_is_one() {
    let Some(model) = crate::common::model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("templated.gguf");
    let template = "{% for message in messages %}<start_of_turn>{{ message['role'] }}\n\
                    {{ message['content'] }}<end_of_turn>\n{% endfor %}<start_of_turn>model\n";
    toolrail_llm::gguf::copy_with_string(
        &model.info().path,
        &copy,
        "tokenizer.chat_template",
        template,
    )
    .unwrap();
    let model = Model::open(&copy).unwrap();

    let setup = RunSetup {
        system: "Be brief.".into(),
        ..RunSetup::default()
    };
    let preview = build_prompt_preview(&setup, &RunInputs::default(), Some(&model), None).unwrap();
    assert_eq!(preview.source, PromptSource::GgufTemplate);
    // llama.cpp recognises the Gemma template: the system text joins the user's turn.
    let user = &setup.user;
    assert_eq!(
        preview.text,
        format!("<start_of_turn>user\nBe brief.\n\n{user}<end_of_turn>\n<start_of_turn>model\n")
    );
}

/// Every sample × envelope × prompt family: the prompt asks for the envelope the grammar
/// enforces, says so where that is not the family's own format, and warns of nothing.
#[test]
fn every_sample_envelope_and_family_gives_a_prompt_that_asks_for_what_the_grammar_allows() {
    use toolrail_tools::envelope::Format;
    use toolrail_tools::prompt::{PromptFamily, user_text_conflict};
    use toolrail_tools::toolset::ToolSet;
    use toolrail_workbench::run::{PromptNote, PromptStyle};

    for sample in toolrail_workbench::samples::SAMPLES {
        let tools = ToolSet::from_text(sample.text).unwrap();
        for format in Format::ALL {
            let inputs = RunInputs {
                tools: Some(tools.clone()),
                format,
                ..RunInputs::default()
            };
            for family in PromptFamily::ALL {
                let setup = RunSetup {
                    style: PromptStyle::Family(family),
                    ..RunSetup::default()
                };
                let preview = build_prompt_preview(&setup, &inputs, None, None).unwrap();
                let what = format!("{} × {format} × {}", sample.file, family.name());
                let adapted = preview
                    .notes
                    .iter()
                    .any(|n| matches!(n, PromptNote::AnswerAdapted(_)));
                assert_eq!(adapted, family.native_format() != format, "{what}");
                assert!(
                    preview.notes.iter().all(|n| !n.is_warning()),
                    "{what}: {:?}",
                    preview.notes
                );
                if format != Format::Pythonic {
                    assert_eq!(
                        user_text_conflict(&preview.text, format, true),
                        None,
                        "{what}:\n{}",
                        preview.text
                    );
                }
            }
        }
    }
}

/// The default setup (the weather sample's openai envelope, a Gemma model): the Gemma turns ask
/// for the JSON object the grammar enforces, not `call:NAME{…}`, and say so.
#[test]
fn a_gemma_prompt_for_the_openai_envelope_asks_for_json_and_says_so() {
    use toolrail_tools::envelope::Format;
    use toolrail_tools::prompt::PromptFamily;
    use toolrail_tools::toolset::ToolSet;
    use toolrail_workbench::run::PromptStyle;

    let sample = toolrail_workbench::samples::SAMPLES[0];
    let inputs = RunInputs {
        tools: Some(ToolSet::from_text(sample.text).unwrap()),
        format: Format::OpenAi,
        ..RunInputs::default()
    };
    let setup = RunSetup {
        style: PromptStyle::Family(PromptFamily::Gemma),
        ..RunSetup::default()
    };
    let preview = build_prompt_preview(&setup, &inputs, None, None).unwrap();
    assert!(preview.text.starts_with("<start_of_turn>user\n"));
    assert!(
        preview.text.contains(
            "To call a tool, reply with only {\"name\": tool name, \"arguments\": {argument name: value}}, for example:\n{\"name\": \"tool_name\", \"arguments\": {\"argument\": \"value\"}}"
        ),
        "{}",
        preview.text
    );
    assert!(!preview.text.contains("call:"), "{}", preview.text);
    assert_eq!(
        preview.notes.iter().map(|n| n.text()).collect::<Vec<_>>(),
        [
            "the gemma prompt asks for the openai envelope the grammar enforces, not its own gemma format"
        ]
    );

    // A raw prompt that shows Gemma's syntax under the openai grammar is a warning.
    let raw = RunSetup {
        style: PromptStyle::Raw,
        user: "<start_of_turn>user\nReply with call:get_weather{...}<end_of_turn>\n".into(),
        ..RunSetup::default()
    };
    let preview = build_prompt_preview(&raw, &inputs, None, None).unwrap();
    assert!(
        preview
            .notes
            .iter()
            .any(|n| n.is_warning() && n.text().contains("gemma calls")),
        "{:?}",
        preview.notes
    );
}
