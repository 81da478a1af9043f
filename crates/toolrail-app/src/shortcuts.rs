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
    // egui lets a shortcut without Shift match a press with Shift, so the shortcuts with more
    // modifiers are tried first: Ctrl+Shift+E is the transcript's, not Ctrl+E's grammar.
    let mut bound: Vec<(Action, KeyboardShortcut)> = Action::ALL
        .into_iter()
        .filter_map(|action| shortcut(&action).map(|sc| (action, sc)))
        .collect();
    bound.sort_by_key(|(_, sc)| std::cmp::Reverse(modifier_count(sc.modifiers)));
    for (action, sc) in bound {
        // every press counts: a window that redraws slowly gets several in one frame
        let presses = ctx.input_mut(|i| i.count_and_consume_key(sc.modifiers, sc.logical_key));
        if presses == 0 || !action.enabled(now) {
            continue;
        }
        if action == Action::Step {
            // a debugger's step key is pressed in bursts: each press is one token
            actions.extend(std::iter::repeat_n(action, presses));
        } else if !actions.contains(&action) {
            actions.push(action);
        }
    }
}

/// How many modifier keys a shortcut holds down.
fn modifier_count(m: Modifiers) -> usize {
    [m.alt, m.ctrl || m.command || m.mac_cmd, m.shift]
        .into_iter()
        .filter(|&held| held)
        .count()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The actions queued by one frame in which `modifiers`+`key` is pressed.
    fn pressed(modifiers: Modifiers, key: Key) -> Vec<Action> {
        pressed_times(modifiers, key, 1)
    }

    /// The actions queued by one frame in which `modifiers`+`key` is pressed `times` times.
    fn pressed_times(modifiers: Modifiers, key: Key, times: usize) -> Vec<Action> {
        let ctx = egui::Context::default();
        let press = |pressed| egui::Event::Key {
            key,
            physical_key: None,
            pressed,
            repeat: false,
            modifiers,
        };
        let input = egui::RawInput {
            events: (0..times)
                .flat_map(|_| [press(true), press(false)])
                .collect(),
            ..egui::RawInput::default()
        };
        let now = Situation {
            grammar: true,
            exportable_run: true,
            ..Situation::default()
        };
        let mut actions = Vec::new();
        let mut output = ctx.run_pass(input, |ctx| collect(ctx, &now, &mut actions));
        output.textures_delta.clear();
        actions
    }

    #[test]
    fn ctrl_shift_e_exports_the_transcript_and_ctrl_e_the_grammar() {
        assert_eq!(
            pressed(Modifiers::COMMAND.plus(Modifiers::SHIFT), Key::E),
            [Action::ExportTranscript]
        );
        assert_eq!(pressed(Modifiers::COMMAND, Key::E), [Action::ExportGrammar]);
    }

    /// A window that redraws slowly (software rendering, a busy machine) gets several presses
    /// in one frame: each F10 is a step, while an export is asked for once.
    #[test]
    fn every_f10_press_in_one_frame_is_a_step() {
        assert_eq!(
            pressed_times(Modifiers::NONE, Key::F10, 3),
            [Action::Step, Action::Step, Action::Step]
        );
        assert_eq!(
            pressed_times(Modifiers::COMMAND, Key::E, 2),
            [Action::ExportGrammar]
        );
    }
}
