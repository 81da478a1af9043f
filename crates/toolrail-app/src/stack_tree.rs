//! The stacks of a state as a tree: stacks that share their bottom frames show them once, and
//! each stack is the path from the root to one leaf.

use toolrail_engine::snapshot::{Frame, StackView};

/// One frame of the tree, with the frames that follow it in some stack.
#[derive(Debug, Clone, PartialEq)]
pub struct StackNode {
    /// The frame.
    pub frame: Frame,
    /// How many stacks run through this frame.
    pub stacks: usize,
    /// True if some stack ends here (this frame is its top: the terminal expected next).
    pub top: bool,
    /// The frames above it, in the order their stacks come.
    pub children: Vec<StackNode>,
}

/// Merges `stacks` (bottom frame first) into a forest of shared prefixes; the second value
/// counts the empty stacks (the grammar may end there).
pub fn stack_tree(stacks: &[StackView]) -> (Vec<StackNode>, usize) {
    let mut roots: Vec<StackNode> = Vec::new();
    let mut empty = 0;
    for stack in stacks {
        if stack.frames.is_empty() {
            empty += 1;
            continue;
        }
        let mut level = &mut roots;
        let last = stack.frames.len() - 1;
        for (depth, frame) in stack.frames.iter().enumerate() {
            let i = match level.iter().position(|n| n.frame.pos == frame.pos) {
                Some(i) => i,
                None => {
                    level.push(StackNode {
                        frame: frame.clone(),
                        stacks: 0,
                        top: false,
                        children: Vec::new(),
                    });
                    level.len() - 1
                }
            };
            let node = &mut level[i];
            node.stacks += 1;
            node.top |= depth == last;
            level = &mut node.children;
        }
    }
    (roots, empty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolrail_gbnf::Span;

    fn frame(pos: u32) -> Frame {
        Frame {
            pos,
            rule: 0,
            rule_name: format!("r{pos}"),
            alternative: 0,
            index: 0,
            span: Span { start: 0, end: 0 },
        }
    }

    fn stack(positions: &[u32]) -> StackView {
        StackView {
            frames: positions.iter().map(|&p| frame(p)).collect(),
        }
    }

    #[test]
    fn shared_prefixes_show_once() {
        let (tree, empty) = stack_tree(&[
            stack(&[1, 2, 3]),
            stack(&[1, 2, 4]),
            stack(&[5]),
            stack(&[]),
        ]);
        assert_eq!(empty, 1);
        assert_eq!(tree.len(), 2);
        assert_eq!(tree[0].stacks, 2);
        assert_eq!(tree[0].children.len(), 1);
        let two = &tree[0].children[0];
        assert_eq!(two.frame.pos, 2);
        assert!(!two.top);
        let tops: Vec<u32> = two.children.iter().map(|n| n.frame.pos).collect();
        assert_eq!(tops, vec![3, 4]);
        assert!(two.children.iter().all(|n| n.top && n.stacks == 1));
        assert!(tree[1].top);
    }
}
