"""The vLLM engine's constructor arguments (``vllm_engine.engine_args``), without vLLM: the
engine itself is tested in test_vllm_engine.py where vLLM is installed."""

from __future__ import annotations

from rltune.engine.vllm_engine import engine_args


def test_vllm_jobs_turn_prefix_caching_on_and_keep_raw_logprobs():
    for on_cuda in (False, True):
        args = engine_args("/models/m", dtype="bfloat16", max_model_len=4096, seed=3,
                           max_batch_size=16, on_cuda=on_cuda, sleep_mode=on_cuda,
                           gpu_memory_utilization=0.3 if on_cuda else None)
        assert args["enable_prefix_caching"] is True
        assert args["logprobs_mode"] == "raw_logprobs"
        assert args["skip_tokenizer_init"] is False  # vLLM's structured outputs need it
        assert (args["model"], args["max_model_len"], args["max_num_seqs"]) == \
            ("/models/m", 4096, 16)
        assert args["enable_sleep_mode"] is on_cuda and args["enforce_eager"] is not on_cuda
    # CPU: whole prompts in one step; CUDA: the memory share passes through
    cpu = engine_args("/m", dtype="float32", max_model_len=512, seed=0, max_batch_size=4,
                      on_cuda=False, sleep_mode=False, gpu_memory_utilization=None)
    assert cpu["enable_chunked_prefill"] is False and cpu["max_num_batched_tokens"] == 8192
    assert "gpu_memory_utilization" not in cpu
    assert args["gpu_memory_utilization"] == 0.3 and "enable_chunked_prefill" not in args
