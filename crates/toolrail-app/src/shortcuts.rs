//! Keyboard shortcuts, defined in one place: which key combination queues which action.

use egui::{Key, KeyboardShortcut, Modifiers};

use toolrail_workbench::actions::{Action, Situation};

/// The shortcut of an action, if it has one.
pub fn shortcut(action: &Action) -> Option<KeyboardShortcut> {
    let (modifiers, key) = match action {
        Action::Run => (Modifiers::COMMAND, Key::Enter),
        Action::Step => (Modifiers::NONE, Key::F10),
        Action::Continue => (Modifiers::NONE, Key::F5),
        Action::Cancel => (Modifiers::COMMAND, Key::Period),
        Action::ExportGrammar => (Modifiers::COMMAND, Key::E),
        Action::ExportTranscript => (Modifiers::COMMAND.plus(Modifiers::SHIFT), Key::E),
        Action::SaveWorkspace => (Modifiers::COMMAND, Key::S),
        Action::Pause | Action::FileChosen(..) => return None,
    };
    Some(KeyboardShortcut::new(modifiers, key))
}

/// Queues the actions whose shortcuts were pressed this frame (consuming the key presses);
/// an action not enabled in `now` is not queued, as its menu item is greyed out.
pub fn collect(ctx: &egui::Context, now: &Situation, actions: &mut Vec<Action>) {
    for action in Action::ALL {
        if let Some(sc) = shortcut(&action)
            && ctx.input_mut(|i| i.consume_shortcut(&sc))
            && action.enabled(now)
            && !actions.contains(&action)
        {
            actions.push(action);
        }
    }
}

/// The shortcut as text for menus ("" when none).
pub fn text(ctx: &egui::Context, action: &Action) -> String {
    shortcut(action)
        .map(|sc| ctx.format_shortcut(&sc))
        .unwrap_or_default()
}

/// Every shortcut as (keys, what it does) for the Help menu: the actions', then the editors'.
pub fn help(ctx: &egui::Context) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Action::ALL
        .iter()
        .filter(|a| shortcut(a).is_some())
        .map(|a| (text(ctx, a), a.label().trim_end_matches('…').to_owned()))
        .collect();
    let find = ctx.format_shortcut(&KeyboardShortcut::new(Modifiers::COMMAND, Key::F));
    let click = ctx.format_modifiers(Modifiers::COMMAND);
    out.extend([
        (
            find,
            "Find in the focused editor (Enter or F3: next match)".to_owned(),
        ),
        (
            "F12".to_owned(),
            "Go to the definition of the rule at the cursor (Grammar)".to_owned(),
        ),
        (
            format!("{click}+click"),
            "Go to the definition of the rule clicked (Grammar)".to_owned(),
        ),
        (
            "right-click".to_owned(),
            "On a token: copy its id or piece".to_owned(),
        ),
    ]);
    out
}
