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
