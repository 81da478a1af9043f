/* No-op coverage hooks for toolrail-llm's build script. scripts/fuzz.sh instruments toolrail's
 * crates through per-package rustflags, which cargo also applies to that package's build script;
 * the build script is not linked with libFuzzer, so it gets these weak, empty hooks instead.
 * The fuzz binaries themselves are linked with libFuzzer's real ones. */
#define STUB(name) __attribute__((weak)) void name(void) {}
STUB(__sanitizer_cov_8bit_counters_init)
STUB(__sanitizer_cov_pcs_init)
STUB(__sanitizer_cov_trace_cmp1)
STUB(__sanitizer_cov_trace_cmp2)
STUB(__sanitizer_cov_trace_cmp4)
STUB(__sanitizer_cov_trace_cmp8)
STUB(__sanitizer_cov_trace_const_cmp1)
STUB(__sanitizer_cov_trace_const_cmp2)
STUB(__sanitizer_cov_trace_const_cmp4)
STUB(__sanitizer_cov_trace_const_cmp8)
STUB(__sanitizer_cov_trace_div4)
STUB(__sanitizer_cov_trace_div8)
STUB(__sanitizer_cov_trace_gep)
STUB(__sanitizer_cov_trace_pc_indir)
STUB(__sanitizer_cov_trace_switch)
