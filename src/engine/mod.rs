//! Recognizer over llama.cpp-style stacks.
