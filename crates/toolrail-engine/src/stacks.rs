//! Grammar stacks as hash-consed persistent lists, and stack sets as interned ordered lists.
//!
//! llama.cpp copies a `std::vector` of element pointers for every stack it touches. Here a
//! stack is a `StackId` naming an immutable node `(top position, rest of the stack)`; equal
//! stacks get equal ids, so pushing, popping, comparing and hashing are O(1), and a whole
//! recognizer state is a couple of integers, which makes keeping one per token cheap.

use rustc_hash::FxHashMap;

/// An interned grammar stack; [`EMPTY_STACK`] is the empty stack (the grammar may end here).
pub type StackId = u32;

/// The empty stack.
pub const EMPTY_STACK: StackId = 0;

/// An interned ordered set of stacks; [`DEAD_SET`] is the empty set (nothing can follow).
pub type SetId = u32;

/// The empty set of stacks: the input was rejected.
pub const DEAD_SET: SetId = 0;

/// Stands for a step that took more than [`MAX_STEP_WORK`]: the grammar is too ambiguous to
/// follow.
pub const EXPLODED_SET: SetId = 1;

/// The most work one step over one character may take, counted as stacks examined plus
/// expanded stacks visited (before duplicates are removed). This, not the number of live
/// stacks, is what makes an ambiguous grammar slow (llama.cpp then crawls and runs out of
/// memory), so a large unambiguous alternation (a 70,000-value enum: about 3 units per value
/// on its first character) passes, and a step that would take longer stops with a verdict.
pub const MAX_STEP_WORK: usize = 1 << 22;

#[derive(Clone, Copy, Debug)]
struct Node {
    top: u32,
    rest: StackId,
}

/// Owns every stack and stack set built so far.
#[derive(Clone, Debug)]
pub struct StackArena {
    nodes: Vec<Node>,
    node_index: FxHashMap<(u32, StackId), StackId>,
    sets: Vec<Box<[StackId]>>,
    set_index: FxHashMap<Box<[StackId]>, SetId>,
    /// Stacks held by all sets together.
    set_elements: usize,
}

impl Default for StackArena {
    fn default() -> Self {
        let mut arena = StackArena {
            // Node 0 stands for the empty stack; its fields are never read.
            nodes: vec![Node {
                top: u32::MAX,
                rest: EMPTY_STACK,
            }],
            node_index: FxHashMap::default(),
            sets: Vec::new(),
            set_index: FxHashMap::default(),
            set_elements: 0,
        };
        arena.intern_set(&[]);
        // EXPLODED_SET: an empty placeholder that no real set is ever interned as.
        arena.sets.push(Box::new([]));
        arena
    }
}

impl StackArena {
    /// An empty arena with room for `nodes` stack nodes and `sets` sets: an engine compacted
    /// while it walks deep input grows back to about its old size, and growing there from
    /// nothing rehashes its indexes a dozen times.
    pub fn with_capacity(nodes: usize, sets: usize) -> StackArena {
        let mut arena = StackArena::default();
        arena.nodes.reserve(nodes);
        arena.node_index.reserve(nodes);
        arena.sets.reserve(sets);
        arena.set_index.reserve(sets);
        arena
    }

    /// The stack `rest` with element position `top` pushed on it.
    pub fn push(&mut self, rest: StackId, top: u32) -> StackId {
        if let Some(&id) = self.node_index.get(&(top, rest)) {
            return id;
        }
        let id = self.nodes.len() as StackId;
        self.nodes.push(Node { top, rest });
        self.node_index.insert((top, rest), id);
        id
    }

    /// The element position on top of `stack` (None for the empty stack).
    #[inline]
    pub fn top(&self, stack: StackId) -> Option<u32> {
        (stack != EMPTY_STACK).then(|| self.nodes[stack as usize].top)
    }

    /// `stack` without its top.
    #[inline]
    pub fn pop(&self, stack: StackId) -> StackId {
        self.nodes[stack as usize].rest
    }

    /// The positions of `stack`, bottom first (llama.cpp's vector order).
    pub fn positions(&self, mut stack: StackId) -> Vec<u32> {
        let mut out = Vec::new();
        while stack != EMPTY_STACK {
            let node = self.nodes[stack as usize];
            out.push(node.top);
            stack = node.rest;
        }
        out.reverse();
        out
    }

    /// The id of the ordered set `stacks` (which must hold no duplicates).
    pub fn intern_set(&mut self, stacks: &[StackId]) -> SetId {
        if let Some(&id) = self.set_index.get(stacks) {
            return id;
        }
        let id = self.sets.len() as SetId;
        self.set_elements += stacks.len();
        let boxed: Box<[StackId]> = stacks.into();
        self.sets.push(boxed.clone());
        self.set_index.insert(boxed, id);
        id
    }

    /// The stacks of set `set`, in order.
    #[inline]
    pub fn set(&self, set: SetId) -> &[StackId] {
        &self.sets[set as usize]
    }

    /// Stack nodes plus the stacks held by all sets: what the arena's memory grows with (each
    /// counts a few machine words).
    pub fn entries(&self) -> usize {
        self.nodes.len() + 2 * self.set_elements
    }

    /// Number of distinct stacks and sets built (for memory reporting).
    pub fn sizes(&self) -> (usize, usize) {
        (self.nodes.len(), self.sets.len())
    }
}
