// toolrail's shim over llama.cpp's chat machinery (common/chat.h): what llama-server builds from a
// chat template, tools and messages (prompt, tool-call grammar, lazy triggers, preserved tokens,
// parser), and llama.cpp's own parse of a model's output.
//
// Every entry point exchanges JSON text, catches every C++ exception (none crosses into Rust), and
// checks the preconditions that would otherwise reach a GGML_ASSERT. Outputs and error messages
// are malloc'd and freed with toolrail_chat_free_string.
//
// The request defaults and the word->token trigger conversion mirror llama-server b11434
// (tools/server/server-common.cpp oaicompat_chat_params_parse, server-schema.cpp params_from_json),
// which llama-cpp-sys-2 does not ship; see docs/design/template-grammars.md section 2.1.

#include "chat.h"
#include "common.h"
#include "log.h"
#include "llama.h"
#include "src/llama-grammar.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

using ojson = nlohmann::ordered_json;

struct toolrail_chat {
    common_chat_templates_ptr templates;
    llama_model *             model = nullptr;  // vocab-only, owned; null for a template text
    std::string               template_source;  // "gguf" or "text"

    ~toolrail_chat() {
        if (model != nullptr) {
            llama_model_free(model);
        }
    }
};

namespace {

char * copy_string(const std::string & s) {
    char * out = static_cast<char *>(std::malloc(s.size() + 1));
    if (out != nullptr) {
        std::memcpy(out, s.data(), s.size());
        out[s.size()] = '\0';
    }
    return out;
}

void set_error(char ** err, const std::string & message) {
    if (err != nullptr) {
        *err = copy_string(message);
    }
}

// Runs `body`, turning every exception into an error message. Returns 0 on success, 2 for the
// exceptions llama-server answers with HTTP 400 (std::invalid_argument and common_json_error,
// tools/server/server.cpp ex_wrapper) and 1 for the others, which it answers with HTTP 500.
template <typename F> int guarded(char ** err, F body) {
    try {
        body();
        return 0;
    } catch (const std::invalid_argument & e) {
        set_error(err, e.what());
        return 2;
    } catch (const common_json_error & e) {
        set_error(err, e.what());
        return 2;
    } catch (const std::exception & e) {
        set_error(err, e.what());
    } catch (...) {
        set_error(err, "unknown C++ exception in llama.cpp's chat code");
    }
    return 1;
}

// Parses a template as common_chat_templates_init will, to report llama.cpp's own message when
// it cannot: init logs the parser's error and rethrows it sliced (`throw e;` on a
// std::exception&), whose what() is only "std::exception".
void check_template_parses(const std::string & src, const std::string & bos, const std::string & eos) {
    if (src.empty()) {
        return;
    }
    common_chat_template probe(src, bos, eos);
    (void) probe;
}

void quiet_common_log() {
    // common/ logs INFO to stdout from a worker thread; keep the CLI's stdout clean.
    common_log_set_verbosity_thold(-1);
}

const char * trigger_type_name(common_grammar_trigger_type type) {
    switch (type) {
        case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN:        return "token";
        case COMMON_GRAMMAR_TRIGGER_TYPE_WORD:         return "word";
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN:      return "pattern";
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: return "pattern_full";
    }
    return "unknown";
}

common_grammar_trigger_type trigger_type_from_name(const std::string & name) {
    if (name == "token") return COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN;
    if (name == "word") return COMMON_GRAMMAR_TRIGGER_TYPE_WORD;
    if (name == "pattern") return COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN;
    if (name == "pattern_full") return COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL;
    throw std::runtime_error("unknown trigger type \"" + name + "\"");
}

ojson trigger_json(const common_grammar_trigger & t) {
    ojson j = ojson::object();
    j["type"]  = trigger_type_name(t.type);
    j["value"] = t.value;
    if (t.type == COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN) {
        j["token"] = t.token;
    }
    return j;
}

// The regex the sampler builds for a trigger (common/sampling.cpp common_sampler_init).
std::string sampler_pattern(const common_grammar_trigger & t) {
    switch (t.type) {
        case COMMON_GRAMMAR_TRIGGER_TYPE_WORD:
            return regex_escape(t.value);
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN:
            return t.value;
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: {
            if (t.value.empty()) {
                return "^$";
            }
            return (t.value.front() != '^' ? "^" : "") + t.value + (t.value.back() != '$' ? "$" : "");
        }
        case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN:
            break;
    }
    return "";
}

// A JSON value as a string for chat_template_kwargs (the server dumps each value).
std::string kwarg_value(const ojson & v) {
    return v.dump();
}

ojson caps_json(const common_chat_templates * tmpls) {
    ojson caps = ojson::object();
    for (const auto & [key, value] : common_chat_templates_get_caps(tmpls)) {
        caps[key] = value;
    }
    return caps;
}

bool get_bool(const ojson & req, const char * key, bool fallback) {
    if (req.contains(key) && !req[key].is_null()) {
        if (!req[key].is_boolean()) {
            throw std::runtime_error(std::string("request field \"") + key + "\" must be true or false");
        }
        return req[key].get<bool>();
    }
    return fallback;
}

std::string get_string(const ojson & req, const char * key, const std::string & fallback) {
    if (req.contains(key) && !req[key].is_null()) {
        if (!req[key].is_string()) {
            throw std::runtime_error(std::string("request field \"") + key + "\" must be a string");
        }
        return req[key].get<std::string>();
    }
    return fallback;
}

}  // namespace

extern "C" {

void toolrail_chat_free_string(char * s) {
    std::free(s);
}

int toolrail_chat_open_template(const char * template_src, const char * bos, const char * eos,
                                toolrail_chat ** out, char ** err) {
    return guarded(err, [&] {
        quiet_common_log();
        if (out == nullptr || template_src == nullptr) {
            throw std::runtime_error("null argument");
        }
        std::string src = template_src;
        if (src.empty()) {
            throw std::runtime_error("the chat template is empty");
        }
        check_template_parses(src, bos ? bos : "", eos ? eos : "");
        auto handle             = std::make_unique<toolrail_chat>();
        handle->templates       = common_chat_templates_init(nullptr, src, bos ? bos : "", eos ? eos : "");
        handle->template_source = "text";
        if (!handle->templates) {
            throw std::runtime_error("llama.cpp could not load the chat template");
        }
        *out = handle.release();
    });
}

int toolrail_chat_open_gguf(const char * gguf_path, const char * template_override, toolrail_chat ** out,
                            char ** err) {
    return guarded(err, [&] {
        quiet_common_log();
        if (out == nullptr || gguf_path == nullptr) {
            throw std::runtime_error("null argument");
        }
        auto params       = llama_model_default_params();
        params.vocab_only = true;
        auto handle       = std::make_unique<toolrail_chat>();
        handle->model     = llama_model_load_from_file(gguf_path, params);
        if (handle->model == nullptr) {
            throw std::runtime_error(std::string("llama.cpp could not load the vocabulary of ") + gguf_path);
        }
        std::string override_src = template_override ? template_override : "";
        if (!override_src.empty()) {
            check_template_parses(override_src, "", "");
        } else if (const char * own = llama_model_chat_template(handle->model, nullptr)) {
            check_template_parses(own, "", "");
        }
        handle->templates        = common_chat_templates_init(handle->model, override_src);
        handle->template_source  = override_src.empty() ? "gguf" : "text";
        if (!handle->templates) {
            throw std::runtime_error("llama.cpp could not load the chat template");
        }
        *out = handle.release();
    });
}

void toolrail_chat_close(toolrail_chat * handle) {
    delete handle;
}

// Applies the template to an OpenAI-style request (see template.rs ChatRequest for the fields).
int toolrail_chat_apply(const toolrail_chat * handle, const char * request_json, char ** out_json, char ** err) {
    return guarded(err, [&] {
        if (handle == nullptr || !handle->templates || request_json == nullptr || out_json == nullptr) {
            throw std::runtime_error("null argument");
        }
        const common_chat_templates * tmpls = handle->templates.get();
        ojson req = ojson::parse(request_json);
        if (!req.is_object()) {
            throw std::runtime_error("the request must be a JSON object");
        }
        const bool server = get_string(req, "defaults", "server") == "server";
        ojson warnings = ojson::array();

        common_chat_templates_inputs inputs;
        ojson messages = req.contains("messages") ? req["messages"] : ojson::array();
        if (!messages.is_array()) {
            throw std::runtime_error("\"messages\" must be an array");
        }
        inputs.messages = common_chat_msgs_parse_oaicompat(common_json::parse(messages.dump()));
        ojson tools = req.contains("tools") && !req["tools"].is_null() ? req["tools"] : ojson::array();
        if (!tools.is_array()) {
            throw std::runtime_error("\"tools\" must be an array");
        }
        inputs.tools = common_chat_tools_parse_oaicompat(common_json::parse(tools.dump()));

        // tool_choice: a string, or a named-function object, which llama-server b11434 reads
        // with json_value<std::string> and so silently replaces with its default "auto".
        std::string tool_choice = "auto";
        if (req.contains("tool_choice") && !req["tool_choice"].is_null()) {
            if (req["tool_choice"].is_string()) {
                tool_choice = req["tool_choice"].get<std::string>();
            } else {
                warnings.push_back(
                    "llama-server b11434 ignores a tool_choice that names a function and uses \"auto\"");
            }
        }
        inputs.tool_choice = common_chat_tool_choice_parse_oaicompat(tool_choice);

        const auto caps = common_chat_templates_get_caps(tmpls);
        bool caps_parallel = false;
        if (auto it = caps.find("supports_parallel_tool_calls"); it != caps.end()) {
            caps_parallel = it->second;
        }
        inputs.parallel_tool_calls   = get_bool(req, "parallel_tool_calls", server ? caps_parallel : false);
        inputs.add_generation_prompt = get_bool(req, "add_generation_prompt", true);
        if (server && !inputs.messages.empty() && inputs.messages.back().role == "assistant") {
            // prefill_assistant: continue the final assistant message
            inputs.continue_final_message = COMMON_CHAT_CONTINUATION_AUTO;
            inputs.add_generation_prompt  = false;
        }
        inputs.reasoning_format = common_reasoning_format_from_name(
            get_string(req, "reasoning_format", server ? "deepseek" : "none"));

        bool enable_thinking = server ? common_chat_templates_support_enable_thinking(tmpls) : true;
        if (server) {
            inputs.chat_template_kwargs["preserve_reasoning"] = "true";
        }
        if (req.contains("chat_template_kwargs") && !req["chat_template_kwargs"].is_null()) {
            if (!req["chat_template_kwargs"].is_object()) {
                throw std::runtime_error("\"chat_template_kwargs\" must be an object");
            }
            for (const auto & [key, value] : req["chat_template_kwargs"].items()) {
                inputs.chat_template_kwargs[key] = kwarg_value(value);
                if (key == "enable_thinking" && value.is_boolean()) {
                    enable_thinking = value.get<bool>();
                }
            }
        }
        enable_thinking = get_bool(req, "enable_thinking", enable_thinking);
        if (get_string(req, "reasoning_effort", "") == "none") {
            enable_thinking = false;
        }
        inputs.enable_thinking = enable_thinking;
        inputs.json_schema     = get_string(req, "json_schema", "");
        inputs.grammar         = get_string(req, "grammar", "");
        if (!inputs.grammar.empty() && !inputs.tools.empty()) {
            throw std::runtime_error("Cannot use custom grammar constraints with tools.");
        }
        if (req.contains("now") && req["now"].is_number_integer()) {
            inputs.now = std::chrono::system_clock::from_time_t(static_cast<std::time_t>(req["now"].get<int64_t>()));
        }
        // add_bos / add_eos come from the templates (set from the vocabulary when a model is given).
        common_chat_params params = common_chat_templates_apply(tmpls, inputs);

        ojson out = ojson::object();
        out["format"]            = common_chat_format_name(params.format);
        out["format_id"]         = static_cast<int>(params.format);
        out["prompt"]            = params.prompt;
        out["generation_prompt"] = params.generation_prompt;
        out["grammar"]           = params.grammar;
        out["grammar_lazy"]      = params.grammar_lazy;
        ojson triggers           = ojson::array();
        for (const auto & t : params.grammar_triggers) {
            triggers.push_back(trigger_json(t));
        }
        out["grammar_triggers"]   = triggers;
        out["preserved_tokens"]   = params.preserved_tokens;
        out["additional_stops"]   = params.additional_stops;
        out["supports_thinking"]  = params.supports_thinking;
        out["thinking_start_tag"] = params.thinking_start_tag;
        out["thinking_end_tags"]  = params.thinking_end_tags;
        out["parser"]             = params.parser;
        out["caps"]               = caps_json(tmpls);

        // What the server and the sampler do next: preserved tokens and word triggers that are
        // one token become token ids (server-schema.cpp), then every trigger becomes a regex
        // (sampling.cpp). Only possible with a vocabulary.
        if (handle->model != nullptr && !params.grammar.empty()) {
            const llama_vocab * vocab = llama_model_get_vocab(handle->model);
            std::vector<llama_token> preserved_ids;
            for (const auto & t : params.preserved_tokens) {
                auto ids = common_tokenize(vocab, t, false, true);
                if (ids.size() == 1) {
                    preserved_ids.push_back(ids[0]);
                } else {
                    warnings.push_back("preserved token \"" + t + "\" is not one token in this vocabulary; the server ignores it");
                }
            }
            std::vector<common_grammar_trigger> converted;
            for (const auto & t : params.grammar_triggers) {
                if (t.type == COMMON_GRAMMAR_TRIGGER_TYPE_WORD) {
                    auto ids = common_tokenize(vocab, t.value, false, true);
                    if (ids.size() == 1) {
                        bool preserved = false;
                        for (auto id : preserved_ids) {
                            preserved = preserved || id == ids[0];
                        }
                        if (!preserved) {
                            throw std::runtime_error("Grammar trigger word should be marked as preserved token: " + t.value);
                        }
                        common_grammar_trigger token_trigger;
                        token_trigger.type  = COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN;
                        token_trigger.value = t.value;
                        token_trigger.token = ids[0];
                        converted.push_back(token_trigger);
                        continue;
                    }
                }
                converted.push_back(t);
            }
            if (params.grammar_lazy && converted.empty()) {
                throw std::runtime_error("Error: no triggers set for lazy grammar!");
            }
            ojson patterns = ojson::array();
            ojson tokens   = ojson::array();
            ojson server_triggers = ojson::array();
            for (const auto & t : converted) {
                server_triggers.push_back(trigger_json(t));
                if (t.type == COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN) {
                    tokens.push_back(t.token);
                } else {
                    patterns.push_back(sampler_pattern(t));
                }
            }
            ojson prefill = ojson::array();
            if (!params.generation_prompt.empty()) {
                auto ids = common_tokenize(vocab, params.generation_prompt, false, true);
                for (size_t i = 0; i < ids.size(); i++) {
                    std::string piece = common_token_to_piece(vocab, ids[i], true);
                    if (i == 0 && !piece.empty() && std::isspace(static_cast<unsigned char>(piece[0])) &&
                        !std::isspace(static_cast<unsigned char>(params.generation_prompt[0]))) {
                        continue;
                    }
                    prefill.push_back(ids[i]);
                }
            }
            ojson sampler = ojson::object();
            sampler["triggers"]            = server_triggers;
            sampler["patterns"]            = patterns;
            sampler["tokens"]              = tokens;
            sampler["preserved_token_ids"] = preserved_ids;
            sampler["prefill_tokens"]      = params.grammar_lazy ? ojson::array() : prefill;
            out["sampler"]                 = sampler;
        } else {
            out["sampler"] = nullptr;
        }

        ojson resolved = ojson::object();
        resolved["defaults"]              = server ? "server" : "struct";
        resolved["tool_choice"]           = tool_choice;
        resolved["parallel_tool_calls"]   = inputs.parallel_tool_calls;
        resolved["add_generation_prompt"] = inputs.add_generation_prompt;
        resolved["continue_final_message"] = inputs.continue_final_message != COMMON_CHAT_CONTINUATION_NONE;
        resolved["reasoning_format"]      = common_reasoning_format_name(inputs.reasoning_format);
        resolved["enable_thinking"]       = inputs.enable_thinking;
        ojson kwargs = ojson::object();
        for (const auto & [key, value] : inputs.chat_template_kwargs) {
            kwargs[key] = value;
        }
        resolved["chat_template_kwargs"] = kwargs;
        out["inputs"]   = resolved;
        out["warnings"] = warnings;
        *out_json       = copy_string(out.dump());
    });
}

// What llama-server's common_sampler_init (common/sampling.cpp) does with a request's grammar:
// load it with the vocabulary (lazy: with the trigger regexes and tokens), then feed a grammar
// that is not lazy the generation prompt's tokens. `setup_json` is {grammar, lazy, patterns,
// tokens, prefill}. Sets *refusal to null when it succeeds, else to the end of the server's
// HTTP 400 message "Failed to initialize samplers: <what>" (a rejected prefill token is rethrown
// sliced, `throw e;`, so <what> is "std::exception"). Needs a vocabulary.
int toolrail_chat_sampler_check(const toolrail_chat * handle, const char * setup_json, char ** refusal, char ** err) {
    return guarded(err, [&] {
        if (handle == nullptr || handle->model == nullptr || setup_json == nullptr || refusal == nullptr) {
            throw std::runtime_error("the sampler check needs a template loaded with a vocabulary");
        }
        *refusal = nullptr;
        ojson setup = ojson::parse(setup_json);
        const llama_vocab * vocab = llama_model_get_vocab(handle->model);
        const std::string grammar = setup.value("grammar", std::string());
        const bool lazy = setup.value("lazy", false);
        std::vector<std::string> patterns = setup.value("patterns", std::vector<std::string>());
        std::vector<llama_token> tokens = setup.value("tokens", std::vector<llama_token>());
        std::vector<llama_token> prefill = setup.value("prefill", std::vector<llama_token>());
        std::vector<const char *> pattern_ptrs;
        for (const auto & text : patterns) {
            pattern_ptrs.push_back(text.c_str());
        }
        std::string what;
        llama_sampler * grmr = nullptr;
        try {
            grmr = lazy ? llama_sampler_init_grammar_lazy_patterns(vocab, grammar.c_str(), "root", pattern_ptrs.data(),
                                                                   pattern_ptrs.size(), tokens.data(), tokens.size())
                        : llama_sampler_init_grammar(vocab, grammar.c_str(), "root");
            if (grmr == nullptr) {
                what = "failed to parse grammar";
            } else if (!lazy) {
                for (const auto & token : prefill) {
                    llama_sampler_accept(grmr, token);
                }
            }
        } catch (const std::exception & e) {
            what = grmr == nullptr ? std::string(e.what()) : "std::exception";
        }
        if (grmr != nullptr) {
            llama_sampler_free(grmr);
        }
        if (!what.empty()) {
            *refusal = copy_string(what);
        }
    });
}

// Parses model output with the parser of an apply result:
// {format_id, generation_prompt, parser, reasoning_format, parse_tool_calls}.
int toolrail_chat_parse(const char * parse_json, const char * text, size_t text_len, int is_partial, char ** out_json,
                        char ** err) {
    return guarded(err, [&] {
        if (parse_json == nullptr || out_json == nullptr || (text == nullptr && text_len > 0)) {
            throw std::runtime_error("null argument");
        }
        ojson req = ojson::parse(parse_json);
        common_chat_parser_params params;
        int format_id = req.value("format_id", 0);
        if (format_id < 0 || format_id >= COMMON_CHAT_FORMAT_COUNT) {
            throw std::runtime_error("unknown chat format id " + std::to_string(format_id));
        }
        params.format            = static_cast<common_chat_format>(format_id);
        params.generation_prompt = req.value("generation_prompt", std::string());
        params.reasoning_format  = common_reasoning_format_from_name(req.value("reasoning_format", std::string("none")));
        params.parse_tool_calls  = req.value("parse_tool_calls", true);
        std::string parser       = req.value("parser", std::string());
        if (!parser.empty()) {
            params.parser.load(parser);
        }
        std::string input(text == nullptr ? "" : std::string(text, text_len));
        common_chat_msg msg = common_chat_parse(input, is_partial != 0, params);
        ojson out = ojson::object();
        out["role"]              = msg.role;
        out["content"]           = msg.content;
        out["reasoning_content"] = msg.reasoning_content;
        ojson calls = ojson::array();
        for (const auto & call : msg.tool_calls) {
            ojson c = ojson::object();
            c["name"]      = call.name;
            c["arguments"] = call.arguments;
            c["id"]        = call.id;
            calls.push_back(c);
        }
        out["tool_calls"] = calls;
        *out_json         = copy_string(out.dump());
    });
}

// Whether llama.cpp's grammar loader accepts `grammar` with start rule "root" and no vocabulary
// (the check test-chat.cpp makes). Returns 0 and sets *ok to 1 or 0.
int toolrail_grammar_loads(const char * grammar, int * ok, char ** err) {
    return guarded(err, [&] {
        if (grammar == nullptr || ok == nullptr) {
            throw std::runtime_error("null argument");
        }
        llama_grammar * g = llama_grammar_init_impl(nullptr, grammar, "root", false, nullptr, 0, nullptr, 0);
        *ok = g != nullptr ? 1 : 0;
        if (g != nullptr) {
            llama_grammar_free_impl(g);
        }
    });
}

// How long llama.cpp's lazy-grammar trigger search takes on this machine: the triggers become the
// sampler's patterns (sampler_pattern, token triggers left out: they are matched on the token), each
// compiled as llama_grammar_init_impl compiles it, and llama_grammar_trigger_pattern::find (what
// llama_grammar_accept_impl runs on the whole output after every token while the grammar sleeps)
// is timed on a buffer of `text` repeated to each of `lengths` characters. Answers
// {"patterns": [...], "points": [{"chars": n, "ns": t}]}: t the time, in nanoseconds, of one
// search of every pattern (the best of `repeats`). A trigger found in the buffer is an error:
// the search would stop there, so the figure would not be the sleeping grammar's.
int toolrail_trigger_search(const char * request_json, char ** out_json, char ** err) {
    return guarded(err, [&] {
        if (request_json == nullptr || out_json == nullptr) {
            throw std::runtime_error("null argument");
        }
        ojson req = ojson::parse(request_json);
        std::vector<llama_grammar_trigger_pattern> patterns;
        ojson pattern_texts = ojson::array();
        for (const auto & t : req.at("triggers")) {
            common_grammar_trigger trigger;
            const std::string type = t.at("type").get<std::string>();
            trigger.value = t.at("value").get<std::string>();
            if (type == "word") {
                trigger.type = COMMON_GRAMMAR_TRIGGER_TYPE_WORD;
            } else if (type == "pattern") {
                trigger.type = COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN;
            } else if (type == "pattern_full") {
                trigger.type = COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL;
            } else {
                continue;
            }
            auto & p = patterns.emplace_back();
            p.pattern = sampler_pattern(trigger);
            p.regex   = std::regex(p.pattern);
            pattern_texts.push_back(p.pattern);
        }
        const std::string text = req.at("text").get<std::string>();
        const int repeats = std::max(1, req.value("repeats", 3));
        if (text.empty()) {
            throw std::runtime_error("the trigger search needs a text");
        }
        ojson points = ojson::array();
        for (const auto & length : req.at("lengths")) {
            const size_t n = length.get<size_t>();
            std::string buffer;
            buffer.reserve(n + text.size());
            while (buffer.size() < n) {
                buffer += text;
            }
            buffer.resize(n);
            double best = -1.0;
            for (int r = 0; r < repeats; r++) {
                const auto start = std::chrono::steady_clock::now();
                for (const auto & p : patterns) {
                    if (p.find(buffer) != std::string::npos) {
                        throw std::runtime_error("the trigger pattern " + p.pattern + " matches the sample text");
                    }
                }
                const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
                if (best < 0 || ns < best) {
                    best = ns;
                }
            }
            points.push_back({ { "chars", n }, { "ns", best } });
        }
        ojson out = ojson::object();
        out["patterns"] = pattern_texts;
        out["points"]   = points;
        *out_json       = copy_string(out.dump());
    });
}

}  // extern "C"
