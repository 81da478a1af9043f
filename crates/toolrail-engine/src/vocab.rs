//! The vocabulary as the grammar sees it: each token's piece (bytes, decoded with special
//! tokens rendered, as llama.cpp's grammar sampler reads them) and which tokens end generation.
//! The model layer builds it from a GGUF; the mask engine reads only this.

/// Token pieces and end-of-generation flags, indexed by token id.
#[derive(Clone, Debug, Default)]
pub struct TokenTable {
    pieces: Vec<Box<[u8]>>,
    eog: Vec<bool>,
}

impl TokenTable {
    /// A table from each token's piece (index = token id) and the ids that end generation.
    pub fn new(pieces: Vec<Vec<u8>>, eog_ids: impl IntoIterator<Item = u32>) -> Self {
        let mut eog = vec![false; pieces.len()];
        for id in eog_ids {
            if let Some(flag) = eog.get_mut(id as usize) {
                *flag = true;
            }
        }
        TokenTable {
            pieces: pieces.into_iter().map(Vec::into_boxed_slice).collect(),
            eog,
        }
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// True for an empty vocabulary.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The piece of token `id` (empty for ids out of range).
    pub fn piece(&self, id: u32) -> &[u8] {
        self.pieces.get(id as usize).map_or(&[], |p| p)
    }

    /// True if token `id` ends generation.
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.get(id as usize).copied().unwrap_or(false)
    }

    /// True if llama.cpp's grammar sampler always masks token `id` (it is not end-of-generation
    /// and its piece is empty or starts with a NUL byte).
    pub fn always_masked(&self, id: u32) -> bool {
        !self.is_eog(id) && self.piece(id).first().is_none_or(|&b| b == 0)
    }
}
