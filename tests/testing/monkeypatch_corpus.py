"""A corpus of real monkeypatches and site-packages patches, re-expressed (issue 37, item 7).

Each case is one change a public vLLM patch stack makes at run time or in site-packages,
cited by repository, path and commit. Third-party code is not copied: every monkeypatch
module here is written in this project's words and keeps only the *shape* of the
original (the factory function, the saved original, the closure, the wrapper and what it
does with the result, the rebinding); a copy of a vLLM definition is made at test time
from vLLM's own text at the case's release, with the change re-expressed, and, where the
stack's copy was reformatted, run through :func:`ast.unparse` (which re-wraps every
statement and drops every comment and docstring) to keep that shape too. A diff case is a
text edit of vLLM's file at the release.

``tests/authoring/test_monkeypatch.py`` imports every case through the importer (``import
--replacement`` for a monkeypatch, ``import`` for a diff) in the wheel layer and checks the
operations each anchor gets (``want``), or the refusal (``refused``: a substring of the
message); a refused case's ``fixed`` variant is the hand fix the message asks for.
``docs/import.md`` holds the table.
"""

from __future__ import annotations

import ast
import sys
import textwrap
from dataclasses import dataclass, field

PRIME = ("PrimeIntellect-ai/prime-rl", "src/prime_rl/inference/patches.py", "7a7dd802")
NEMO = ("NVIDIA-NeMo/RL", "nemo_rl/models/generation/vllm/vllm_worker.py", "7ea279ab")
NEMO_P = ("NVIDIA-NeMo/RL", "nemo_rl/models/generation/vllm/patches.py", "7ea279ab")
ASCEND = "vllm-project/vllm-ascend"
GAUDI = ("vllm-project/vllm-gaudi", "vllm_gaudi/patches.py", "091bbadda1")
SKYRL = "NovaSky-AI/SkyRL"
GENESIS = "Sandermage/genesis-vllm-patches"


@dataclass
class Copy:
    """A stack's copy of a vLLM definition: vLLM's text at the release, ``edits`` (old, new)
    applied after ``style`` (``verbatim``; ``unparse``: re-wrapped, no comments; ``bare``:
    that, without docstring and annotations), renamed ``name``, decorators left out."""

    replaces: str
    name: str
    edits: list[tuple[str, str]] = field(default_factory=list)
    style: str = "verbatim"
    docstring: str | None = None


@dataclass
class Case:
    """One real change (module docstring)."""

    id: str
    cite: tuple[str, str, str]
    shape: str
    release: str
    want: dict[str, list[str]] | None = None
    refused: str | None = None
    #: a monkeypatch: its module (``@COPY@`` stands for :attr:`copy`, at that indentation)
    source: str | None = None
    name: str = ""
    replaces: str = ""
    copy: Copy | None = None
    #: a diff: vLLM's file and (old, new) text edits of it
    path: str = ""
    edits: list[tuple[str, str]] = field(default_factory=list)
    #: the hand fix of a refused case (a source, or diff edits), and what it gives
    fixed: str | list[tuple[str, str]] | None = None
    fixed_want: dict[str, list[str]] | None = None


def _strip(fn: ast.AST) -> ast.AST:
    """``fn`` without its docstring and annotations (parameters, return, local variables)."""
    for node in ast.walk(fn):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
            if node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
                    and isinstance(node.body[0].value.value, str) and len(node.body) > 1:
                node.body = node.body[1:]
        if isinstance(node, ast.arg):
            node.annotation = None
    return fn


def copy_text(copy: Copy, release: str) -> str:
    """The stack's copy (:class:`Copy`), at column 0."""
    from patchq.plan.anchors import ast_index, cut_segment
    from patchq.vllmdist.sources import release_source

    module, _, qualname = copy.replaces.partition(":")
    source = release_source(release)
    rel = next(r for r in (module.replace(".", "/") + ".py", module.replace(".", "/") + "/__init__.py")
               if source.exists(r))
    text = source.read_text(rel) or ""
    (found,) = ast_index(text)[qualname]
    def_text = cut_segment(text, rel, qualname, found).def_text
    node = ast.parse(textwrap.dedent(def_text)).body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    node.decorator_list = []
    if copy.style == "verbatim":
        lines = textwrap.dedent(def_text).splitlines(keepends=True)
        first = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith(("def ", "async def ")))
        doc = node.body[0] if copy.docstring is not None and isinstance(node.body[0], ast.Expr) else None
        if doc is not None:  # the stack's copy has its own docstring in place of vLLM's
            lines[doc.lineno - 1:doc.end_lineno] = []
        text = "".join(lines[first:])
    else:
        if copy.docstring is not None:
            _strip(node)
        text = ast.unparse(_strip(node) if copy.style == "bare" else node) + "\n"
    for old, new in copy.edits:
        assert text.count(old) == 1, (copy.name, old)
        text = text.replace(old, new)
    text = text.replace(f"def {qualname.rsplit('.', 1)[-1]}(", f"def {copy.name}(", 1)
    if copy.docstring is not None:
        head, _, rest = text.partition(":\n")
        text = f'{head}:\n    """{copy.docstring}"""\n{rest}'
    return text


def source_text(case: Case, source: str | None = None) -> str:
    """The monkeypatch module of ``case`` (its copy put in place of ``@COPY@``)."""
    text = textwrap.dedent(source or case.source or "")
    if case.copy is not None and "@COPY@" in text:
        at = text.index("@COPY@")
        indent = text[text.rfind("\n", 0, at) + 1:at]
        body = textwrap.indent(copy_text(case.copy, case.release), indent)
        text = text.replace(indent + "@COPY@\n", body)
    return text


# --------------------------------------------------------------------------- monkeypatches

CASES: list[Case] = [
    Case("prime-harmony-stop-tokens", PRIME,
         "wrapper in a factory, saved original, the result post-processed (merged stop ids)", "0.24.0",
         want={"ChatCompletionRequest.to_sampling_params": ["result"]},
         name="install_stop_id_merge.merged_params",
         replaces="vllm.entrypoints.openai.chat_completion.protocol:ChatCompletionRequest.to_sampling_params",
         source='''
            def install_stop_id_merge():
                from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

                saved = ChatCompletionRequest.to_sampling_params

                def merged_params(self, max_tokens, default_sampling_params):
                    sp = saved(self, max_tokens, default_sampling_params)
                    server_ids = default_sampling_params.get("stop_token_ids", [])
                    if server_ids:
                        sp.stop_token_ids = list(set(sp.stop_token_ids or []) | set(server_ids))
                    return sp

                ChatCompletionRequest.to_sampling_params = merged_params
            '''),
    Case("prime-no-moe-lora", PRIME, "after-wrapper of a dataclass __post_init__ (a field flipped)", "0.24.0",
         want={"FusedMoEConfig.__post_init__": ["result"]},
         name="disable_moe_lora.post_init",
         replaces="vllm.model_executor.layers.fused_moe.config:FusedMoEConfig.__post_init__",
         source='''
            def disable_moe_lora():
                from vllm.model_executor.layers.fused_moe.config import FusedMoEConfig

                before = FusedMoEConfig.__post_init__

                def post_init(self: FusedMoEConfig):
                    before(self)
                    # fused MoE layers never get LoRA: any kernel may be picked
                    self.is_lora_enabled = False

                FusedMoEConfig.__post_init__ = post_init
            '''),
    Case("prime-fp32-router-logits", PRIME, "after-wrapper of __init__ (*args, **kwargs) with an early return",
         "0.24.0", want={"DeepseekV2MoE.__init__": ["result"]},
         name="fp32_router_logits.wrapped_init",
         replaces="vllm.model_executor.models.deepseek_v2:DeepseekV2MoE.__init__",
         source='''
            def fp32_router_logits():
                import torch
                from vllm.config import get_current_vllm_config
                from vllm.model_executor.models.deepseek_v2 import DeepseekV2MoE

                init = DeepseekV2MoE.__init__

                def wrapped_init(self, *args, **kwargs):
                    init(self, *args, **kwargs)
                    extra = get_current_vllm_config().additional_config or {}
                    if not extra.get("fp32_router_logits", False):
                        return
                    if self.gate.out_dtype is None:
                        self.gate.set_out_dtype(torch.float32)

                DeepseekV2MoE.__init__ = wrapped_init
            '''),
    Case("prime-minimax-m2-lora", PRIME,
         "after-wrapper of __init__ rebuilding a member; its local import is vLLM's own name", "0.24.0",
         want={"MiniMaxM2MoE.__init__": ["result"]},
         name="minimax_lora_gate.wrapped_init",
         replaces="vllm.model_executor.models.minimax_m2:MiniMaxM2MoE.__init__",
         source='''
            def minimax_lora_gate():
                import torch
                from vllm.model_executor.models.minimax_m2 import MiniMaxM2MoE

                init = MiniMaxM2MoE.__init__

                def wrapped_init(self, config, quant_config=None, prefix=""):
                    init(self, config, quant_config, prefix)
                    from vllm.model_executor.layers.fused_moe.router.gate_linear import GateLinear

                    # a bf16 gate weight the LoRA kernels accept; the router logits stay fp32
                    self.gate = GateLinear(config.hidden_size, config.num_local_experts, bias=False,
                                           out_dtype=torch.float32, prefix=f"{prefix}.gate")

                MiniMaxM2MoE.__init__ = wrapped_init
            '''),
    Case("prime-fp32-lm-head-init", PRIME, "after-wrapper of __init__ that logs through the factory's logger",
         "0.24.0", refused="`logger` is an assignment of the enclosing function fp32_lm_head",
         name="fp32_lm_head.wrapped_init",
         replaces="vllm.model_executor.layers.logits_processor:LogitsProcessor.__init__",
         source='''
            def fp32_lm_head():
                import torch
                from vllm.config import get_current_vllm_config
                from vllm.logger import init_logger
                from vllm.model_executor.layers.logits_processor import LogitsProcessor

                logger = init_logger(__name__)
                init = LogitsProcessor.__init__
                get_logits = LogitsProcessor._get_logits

                def wrapped_init(self, *args, **kwargs):
                    init(self, *args, **kwargs)
                    extra = get_current_vllm_config().additional_config or {}
                    self._fp32_logits = extra.get("fp32_lm_head", False)
                    if self._fp32_logits:
                        logger.warning("lm_head in fp32 for this LogitsProcessor")

                def fp32_logits(self, hidden_states, lm_head, embedding_bias):
                    if not getattr(self, "_fp32_logits", False):
                        return get_logits(self, hidden_states, lm_head, embedding_bias)
                    flat = hidden_states.reshape(-1, hidden_states.shape[-1])
                    logits = torch.mm(flat, lm_head.weight.t(), out_dtype=torch.float32)
                    if embedding_bias is not None:
                        logits = logits + embedding_bias.to(torch.float32)
                    logits = self._gather_logits(logits)
                    if logits is not None:
                        logits = logits[..., : self.org_vocab_size]
                    return logits

                LogitsProcessor.__init__ = wrapped_init
                LogitsProcessor._get_logits = fp32_logits
            ''',
         fixed='''
            def fp32_lm_head():
                from vllm.config import get_current_vllm_config
                from vllm.logger import init_logger
                from vllm.model_executor.layers.logits_processor import LogitsProcessor

                init = LogitsProcessor.__init__

                def wrapped_init(self, *args, **kwargs):
                    init(self, *args, **kwargs)
                    extra = get_current_vllm_config().additional_config or {}
                    self._fp32_logits = extra.get("fp32_lm_head", False)
                    if self._fp32_logits:
                        init_logger(__name__).warning("lm_head in fp32 for this LogitsProcessor")

                LogitsProcessor.__init__ = wrapped_init
            ''', fixed_want={"LogitsProcessor.__init__": ["result"]}),
    Case("prime-fp32-lm-head-logits", PRIME,
         "dispatching wrapper: `if not flag: return original(...)`, its own code otherwise", "0.24.0",
         want={"LogitsProcessor._get_logits": ["insert"]},
         name="fp32_lm_head.fp32_logits",
         replaces="vllm.model_executor.layers.logits_processor:LogitsProcessor._get_logits"),
    Case("prime-kv-xfer-tolerate-freed", PRIME,
         "copy in a factory, no docstring nor annotation, two asserts become guards", "0.24.0",
         want={"Scheduler._update_from_kv_xfer_finished": ["replace", "replace"]},
         name="tolerate_freed.update_from_kv_xfer_finished",
         replaces="vllm.v1.core.sched.scheduler:Scheduler._update_from_kv_xfer_finished",
         copy=Copy("vllm.v1.core.sched.scheduler:Scheduler._update_from_kv_xfer_finished",
                   "update_from_kv_xfer_finished", style="bare", edits=[
                       ("logger.debug('Finished recving KV transfer for request %s', req_id)\n"
                        "        assert req_id in self.requests\n",
                        "logger.debug('Finished recving KV transfer for request %s', req_id)\n"
                        "        # freed already this step (an aborted request): nothing left to do\n"
                        "        if req_id not in self.requests:\n            continue\n"),
                       ("logger.debug('Finished sending KV transfer for request %s', req_id)\n"
                        "        assert req_id in self.requests\n",
                        "logger.debug('Finished sending KV transfer for request %s', req_id)\n"
                        "        if req_id not in self.requests:\n            continue\n")]),
         source='''
            def tolerate_freed():
                from vllm.logger import init_logger
                from vllm.v1.core.sched.scheduler import Scheduler
                from vllm.v1.request import RequestStatus

                logger = init_logger("vllm.v1.core.sched.scheduler")

                @COPY@
                Scheduler._update_from_kv_xfer_finished = update_from_kv_xfer_finished
            '''),
    Case("prime-lora-key-prefix", PRIME,
         "re-wrapped copy of a classmethod (rebound as classmethod(...)), one branch changed", "0.24.0",
         want={"LoRAModel.from_local_checkpoint": ["replace"]},
         name="lora_key_prefix.from_checkpoint",
         replaces="vllm.lora.lora_model:LoRAModel.from_local_checkpoint",
         copy=Copy("vllm.lora.lora_model:LoRAModel.from_local_checkpoint", "from_checkpoint", style="unparse",
                   edits=[("if expert_suffix not in expected_lora_modules:",
                           "if expert_suffix not in expected_lora_modules and "
                           "module_name.rsplit('.', 1)[-1] not in expected_lora_modules:")]),
         source='''
            import torch


            def lora_key_prefix():
                from vllm.lora.lora_model import (LoRAModel, MoEEPLoadSpec, PEFTHelper, TensorizerConfig,
                                                  WeightsMapper, _is_remote_expert_key, get_lora_id,
                                                  is_base_embedding_weights, os, parse_fine_tuned_lora_name,
                                                  safetensors)

                @COPY@
                LoRAModel.from_local_checkpoint = classmethod(from_checkpoint)
            '''),
    Case("prime-dp-coordinator-timeout", PRIME, "copy in a factory reading the factory's `timeout`", "0.24.0",
         refused="`timeout` is an assignment of the enclosing function startup_timeout",
         name="startup_timeout.wait_for_addrs",
         replaces="vllm.v1.engine.coordinator:DPCoordinator._wait_for_zmq_addrs",
         copy=Copy("vllm.v1.engine.coordinator:DPCoordinator._wait_for_zmq_addrs", "wait_for_addrs",
                   edits=[("        timeout = 120\n", "")]),
         source='''
            def startup_timeout():
                import multiprocessing.connection
                import os

                from vllm.v1.engine.coordinator import DPCoordinator

                timeout = float(os.environ.get("DP_COORDINATOR_STARTUP_TIMEOUT", "300"))

                @COPY@
                DPCoordinator._wait_for_zmq_addrs = wait_for_addrs
            ''',
         fixed='''
            def startup_timeout():
                import multiprocessing.connection
                import os

                from vllm.v1.engine.coordinator import DPCoordinator

                def wait_for_addrs(self, zmq_addr_pipe):
                    try:
                        timeout = float(os.environ.get("DP_COORDINATOR_STARTUP_TIMEOUT", "300"))
                        ready = multiprocessing.connection.wait([zmq_addr_pipe, self.proc.sentinel], timeout=timeout)
                        if not ready:
                            raise RuntimeError(
                                "DP Coordinator process failed to report ZMQ addresses "
                                f"within timeout={timeout} seconds during startup."
                            )
                        try:
                            return zmq_addr_pipe.recv()
                        except EOFError:
                            raise RuntimeError("DP Coordinator process failed during startup.") from None
                    finally:
                        zmq_addr_pipe.close()

                DPCoordinator._wait_for_zmq_addrs = wait_for_addrs
            ''', fixed_want={"DPCoordinator._wait_for_zmq_addrs": ["insert", "replace"]}),
    Case("prime-tokenize-token-len", PRIME, "copy with its own docstring, one statement changed", "0.24.0",
         want={"TokenizeParams._token_len_check": ["replace"]},
         name="prompt_only_limits.token_len_check",
         replaces="vllm.renderers.params:TokenizeParams._token_len_check",
         copy=Copy("vllm.renderers.params:TokenizeParams._token_len_check", "token_len_check", style="bare",
                   docstring="Only the prompt must fit the context.",
                   edits=[("max_input_tokens = self.max_input_tokens", "max_input_tokens = self.max_total_tokens")]),
         source='''
            def prompt_only_limits():
                from vllm.exceptions import VLLMValidationError
                from vllm.renderers.params import TokenizeParams

                @COPY@
                TokenizeParams._token_len_check = token_len_check
            '''),
    Case("prime-tokenize-text-len", PRIME, "copy, one statement changed", "0.24.0",
         want={"TokenizeParams._text_len_check": ["replace"]},
         name="prompt_only_limits.text_len_check",
         replaces="vllm.renderers.params:TokenizeParams._text_len_check",
         copy=Copy("vllm.renderers.params:TokenizeParams._text_len_check", "text_len_check", style="bare",
                   edits=[("max_input_tokens = self.max_input_tokens", "max_input_tokens = self.max_total_tokens")]),
         source='''
            def prompt_only_limits():
                from vllm.exceptions import VLLMValidationError
                from vllm.renderers.params import TokenizeParams

                @COPY@
                TokenizeParams._text_len_check = text_len_check
            '''),
    Case("prime-tokenize-encode-kwargs", PRIME, "re-wrapped copy, one branch's statement changed", "0.24.0",
         want={"TokenizeParams.get_encode_kwargs": ["replace"]},
         name="prompt_only_limits.encode_kwargs",
         replaces="vllm.renderers.params:TokenizeParams.get_encode_kwargs",
         copy=Copy("vllm.renderers.params:TokenizeParams.get_encode_kwargs", "encode_kwargs", style="unparse",
                   edits=[("max_length = self.max_input_tokens + 1", "max_length = self.max_total_tokens + 1")]),
         source='''
            def prompt_only_limits():
                from vllm.renderers.params import TokenizeParams

                @COPY@
                TokenizeParams.get_encode_kwargs = encode_kwargs
            '''),
    Case("prime-qwen3-coder-newline-trim", PRIME,
         "copy of a module function reading vLLM's module through an alias, with a helper of the factory",
         "0.24.0", want={"_qwen3_arg_converter": ["replace", "replace"], "<module>": ["insert"]},
         name="one_newline_trim.arg_converter", replaces="vllm.parser.qwen3:_qwen3_arg_converter",
         copy=Copy("vllm.parser.qwen3:_qwen3_arg_converter", "arg_converter", edits=[
             ("_PARAM_RE.finditer", "qwen3._PARAM_RE.finditer"),
             ("remaining = _PARAM_RE.sub", "remaining = qwen3._PARAM_RE.sub"),
             ("m = _PARTIAL_PARAM_RE", "m = qwen3._PARTIAL_PARAM_RE"),
             ("        value = match.group(2)\n        params[name] = value.strip()\n",
              "        value = match.group(2)\n        params[name] = trim_one(value)\n"),
             ("            if name:\n                params[name] = value.strip()\n",
              "            if name:\n                params[name] = trim_one(value)\n")]),
         source='''
            def one_newline_trim():
                import json

                from vllm.parser import qwen3

                def trim_one(value: str) -> str:
                    return value.removeprefix("\\n").removesuffix("\\n")

                @COPY@
                qwen3._qwen3_arg_converter = arg_converter
            '''),
    Case("prime-routed-experts-nixl", PRIME,
         "dispatching wrapper that calls the original again inside try/finally", "0.24.0",
         refused="is called at line", name="routed_experts.post_init",
         replaces="vllm.config.vllm:VllmConfig.__post_init__",
         source='''
            def routed_experts():
                from vllm.config.vllm import VllmConfig

                original = VllmConfig.__post_init__

                def post_init(config):
                    if config.kv_transfer_config is None:
                        return original(config)
                    config.model_config.enable_return_routed_experts = False
                    try:
                        return original(config)
                    finally:
                        config.model_config.enable_return_routed_experts = True

                VllmConfig.__post_init__ = post_init
            '''),
    Case("prime-strip-routed-experts", PRIME,
         "wrapper passing one argument through a helper generator of the factory", "0.24.0",
         want={"OpenAIServingChat.chat_completion_full_generator": ["insert"], "<module>": ["insert"]},
         name="strip_experts.full_generator",
         replaces="vllm.entrypoints.openai.chat_completion.serving:OpenAIServingChat.chat_completion_full_generator",
         source='''
            def strip_experts():
                from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat

                full = OpenAIServingChat.chat_completion_full_generator

                async def without_experts(results):
                    async for res in results:
                        for out in res.outputs:
                            out.routed_experts = None
                        yield res

                async def full_generator(self, request, result_generator, *args, **kwargs):
                    return await full(self, request, without_experts(result_generator), *args, **kwargs)

                OpenAIServingChat.chat_completion_full_generator = full_generator
            '''),
    Case("nemo-nsight-deferred-capture", NEMO, "copy nested in a method's factory, reading its closure dict",
         "0.25.1", refused="`nsight_options` is an assignment of the enclosing function _nsight_patch",
         name="Worker._nsight_patch.configure",
         replaces="vllm.v1.executor.ray_executor:RayDistributedExecutor._configure_ray_workers_use_nsight",
         source='''
            class Worker:
                @staticmethod
                def _nsight_patch() -> None:
                    from vllm.v1.executor.ray_executor import RayDistributedExecutor

                    nsight_options = {"t": "cuda,nvtx", "capture-range": "cudaProfilerApi"}

                    def configure(self, ray_remote_kwargs):
                        runtime_env = ray_remote_kwargs.setdefault("runtime_env", {})
                        runtime_env.update({"nsight": nsight_options})
                        return ray_remote_kwargs

                    RayDistributedExecutor._configure_ray_workers_use_nsight = configure
            ''',
         fixed='''
            class Worker:
                @staticmethod
                def _nsight_patch() -> None:
                    from vllm.v1.executor.ray_executor import RayDistributedExecutor

                    def configure(self, ray_remote_kwargs):
                        runtime_env = ray_remote_kwargs.setdefault("runtime_env", {})
                        runtime_env.update({"nsight": {"t": "cuda,nvtx", "capture-range": "cudaProfilerApi"}})
                        return ray_remote_kwargs

                    RayDistributedExecutor._configure_ray_workers_use_nsight = configure
            ''', fixed_want={"RayDistributedExecutor._configure_ray_workers_use_nsight": ["replace"]}),
    Case("ascend-dspark-post-init",
         (ASCEND, "vllm_ascend/patch/platform/patch_speculative_config.py", "182b75ea84"),
         "after-wrapper with a module-level saved original; vLLM's returns self, the wrapper None", "0.27.1",
         want={"SpeculativeConfig.__post_init__": ["result"]}, name="post_init_then_ptd",
         replaces="vllm.config.speculative:SpeculativeConfig.__post_init__",
         source='''
            from vllm.config.speculative import SpeculativeConfig

            _post_init = SpeculativeConfig.__post_init__


            def post_init_then_ptd(self):
                _post_init(self)
                if self.use_dspark():
                    hf = getattr(getattr(self, "draft_model_config", None), "hf_config", None)
                    if getattr(hf, "ptd_token_id", None) is None:
                        hf.ptd_token_id = getattr(hf, "dspark_noise_token_id", None)


            SpeculativeConfig.__post_init__ = post_init_then_ptd
            '''),
    Case("ascend-dp-device-ids", (ASCEND, "vllm_ascend/patch/platform/patch_dp_device_ids.py", "182b75ea84"),
         "wrapper with an early return before the original; it starts as vLLM's function does", "0.27.1",
         want={"get_physical_gpu_ids_for_local_dp_rank": ["insert"]},
         name="presharded_ids", replaces="vllm.v1.engine.utils:get_physical_gpu_ids_for_local_dp_rank",
         source='''
            import os

            from vllm.platforms import current_platform
            from vllm.v1.engine import utils as engine_utils

            _ids = engine_utils.get_physical_gpu_ids_for_local_dp_rank


            def presharded_ids(device_control_env_var, local_dp_rank, world_size, local_world_size=None,
                               user_assigned_gpu_ids=None):
                if local_world_size is None:
                    local_world_size = world_size
                # the variable already holds this rank's slice: index it from 0
                if user_assigned_gpu_ids is None and device_control_env_var in os.environ:
                    devices = [d for d in os.environ[device_control_env_var].split(",") if d]
                    if local_dp_rank * world_size + local_world_size > len(devices):
                        return [current_platform.device_control_id_to_physical_device_id(devices[i])
                                for i in range(local_world_size)]
                return _ids(device_control_env_var, local_dp_rank, world_size, local_world_size,
                            user_assigned_gpu_ids)


            engine_utils.get_physical_gpu_ids_for_local_dp_rank = presharded_ids
            '''),
    Case("ascend-mamba-copy-ptrs-int64", (ASCEND, "vllm_ascend/patch/worker/patch_mamba_utils.py", "182b75ea84"),
         "classmethod wrapper that passes an argument through a lambda reading it", "0.27.1",
         want={"MambaCopyBuffers.create": ["insert"]}, name="create_int64",
         replaces="vllm.v1.worker.mamba_utils:MambaCopyBuffers.create",
         source='''
            import torch
            from vllm.v1.worker.mamba_utils import MambaCopyBuffers

            _create = MambaCopyBuffers.create


            @classmethod
            def create_int64(cls, max_num_reqs, kv_cache_config, copy_funcs, make_buffer):
                return _create(max_num_reqs, kv_cache_config, copy_funcs,
                               lambda n, dtype: make_buffer(n, dtype=torch.int64 if dtype == torch.uint64 else dtype))


            MambaCopyBuffers.create = create_int64
            '''),
    Case("ascend-cudagraph-padded-descriptor", (ASCEND, "vllm_ascend/patch/worker/patch_cudagraph.py", "182b75ea84"),
         "copy of a method, one `if` test narrowed", "0.27.1",
         want={"CudagraphDispatcher._create_padded_batch_descriptor": ["replace"]},
         name="padded_descriptor",
         replaces="vllm.v1.cudagraph_dispatcher:CudagraphDispatcher._create_padded_batch_descriptor",
         copy=Copy("vllm.v1.cudagraph_dispatcher:CudagraphDispatcher._create_padded_batch_descriptor",
                   "padded_descriptor", edits=[(
                       "if uniform_decode and self.cudagraph_mode.has_mode(CUDAGraphMode.FULL):",
                       "# a FULL-only mode is no uniform decode\n    if (\n        uniform_decode\n"
                       "        and self.cudagraph_mode.has_mode(CUDAGraphMode.FULL)\n"
                       "        and self.cudagraph_mode != CUDAGraphMode.FULL\n    ):")]),
         source='''
            from vllm.config import CUDAGraphMode
            from vllm.forward_context import BatchDescriptor
            from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher


            @COPY@

            CudagraphDispatcher._create_padded_batch_descriptor = padded_descriptor
            '''),
    Case("ascend-dsa-post-load",
         (ASCEND, "vllm_ascend/patch/worker/patch_process_weights_after_loading.py", "8f12262c0a"),
         "copy of a module function calling a helper the patch module defines", "0.23.0",
         want={"process_weights_after_loading": ["replace"], "<module>": ["insert"]},
         name="post_load_with_dsa", replaces="vllm.model_executor.model_loader.utils:process_weights_after_loading",
         copy=Copy("vllm.model_executor.model_loader.utils:process_weights_after_loading", "post_load_with_dsa",
                   style="unparse", edits=[(
                       "if isinstance(module, (Attention, MLAAttention, MMEncoderAttention)) and",
                       "if (isinstance(module, (Attention, MLAAttention, MMEncoderAttention))"
                       " or is_dsa(module)) and")]),
         source='''
            import torch
            from torch import nn
            from vllm.config import ModelConfig
            from vllm.model_executor.layers.attention import Attention, MLAAttention, MMEncoderAttention
            from vllm.model_executor.layers.quantization.base_config import QuantizeMethodBase
            from vllm.model_executor.model_loader import utils
            from vllm.model_executor.model_loader.reload import set_torchao_reload_attrs
            from vllm.model_executor.model_loader.utils import device_loading_context


            def is_dsa(module: nn.Module) -> bool:
                kind = type(module)
                return kind.__name__ == "DSAAttention" and kind.__module__.startswith("vllm_ascend.")


            @COPY@

            utils.process_weights_after_loading = post_load_with_dsa
            '''),
    Case("gaudi-count-greater-uncompiled", GAUDI, "copy without vLLM's @torch.compile, rebound undecorated",
         "0.27.1", want={"batched_count_greater_than": ["header"]}, name="count_greater_eager",
         replaces="vllm.v1.sample.ops.logprobs:batched_count_greater_than",
         copy=Copy("vllm.v1.sample.ops.logprobs:batched_count_greater_than", "count_greater_eager",
                   docstring="Eager: the compiled kernel's dynamic shapes break on HPU."),
         source='''
            import torch


            @COPY@

            def install():
                from vllm.v1.sample.ops import logprobs

                logprobs.batched_count_greater_than = count_greater_eager
            '''),
    Case("gaudi-gather-logprobs-no-unbacked", GAUDI,
         "copy of a staticmethod with local imports of what vLLM's module has, through a module alias", "0.27.1",
         want={"Sampler.gather_logprobs": ["replace"]}, name="gather_without_unbacked",
         replaces="vllm.v1.sample.sampler:Sampler.gather_logprobs",
         source='''
            import torch


            def gather_without_unbacked(logprobs: torch.Tensor, num_logprobs: int, token_ids: torch.Tensor):
                """The same gather, without the two mark_unbacked calls dynamo forbids on HPU."""
                import vllm.v1.sample.sampler as sampler_mod
                from vllm.v1.outputs import LogprobsTensors

                assert token_ids.dtype == torch.int64
                topk_logprobs, topk_indices = torch.topk(logprobs, num_logprobs, dim=-1)
                token_ids = token_ids.unsqueeze(-1)
                token_logprobs = logprobs.gather(-1, token_ids)
                token_ranks = sampler_mod.batched_count_greater_than(logprobs, token_logprobs)
                indices = torch.cat((token_ids, topk_indices), dim=1)
                logprobs = torch.cat((token_logprobs, topk_logprobs), dim=1)
                indices = indices.to(torch.int32)
                return LogprobsTensors(indices, logprobs, token_ranks)


            def install():
                import vllm.v1.sample.sampler as sampler_mod

                sampler_mod.Sampler.gather_logprobs = staticmethod(gather_without_unbacked)
            '''),
    Case("gaudi-mamba-bind-tuple", GAUDI, "copy of a method whose body is replaced", "0.27.1",
         want={"MambaBase.bind_kv_cache": ["replace"]}, name="bind_states",
         replaces="vllm.model_executor.layers.mamba.abstract:MambaBase.bind_kv_cache",
         source='''
            def bind_states(self, kv_cache) -> None:
                # HPU keeps the states as separate tensors already
                self.kv_cache = tuple(kv_cache) if isinstance(kv_cache, (list, tuple)) else (kv_cache,)


            def install():
                from vllm.model_executor.layers.mamba.abstract import MambaBase

                MambaBase.bind_kv_cache = bind_states
            '''),
    Case("gaudi-shm-check-noop", GAUDI, "a no-op taking *args, **kwargs in place of a check", "0.27.1",
         want={"check_shm_free_space": ["insert"]}, name="skip_shm_check",
         replaces="vllm.distributed.device_communicators.shm_broadcast:check_shm_free_space",
         source='''
            def skip_shm_check(*args, **kwargs) -> None:
                """tmpfs allocates lazily; the eager free-space check rejects working HPU containers."""
                return None


            def install():
                from vllm.distributed.device_communicators import shm_broadcast

                shm_broadcast.check_shm_free_space = skip_shm_check
            '''),
    Case("areal-completions-route",
         ("inclusionAI/AReaL", "areal/engine/vllm_ext/areal_vllm_server.py", "4aef98d8d8"),
         "wrapper under `if __name__ == '__main__':` reading the module's own router", "0.19.1",
         refused="`router` is an assignment of", name="build_app_with_route",
         replaces="vllm.entrypoints.openai.api_server:build_app",
         source='''
            from fastapi import APIRouter
            from vllm.entrypoints.openai import api_server

            router = APIRouter()

            if __name__ == "__main__":
                _build_app = api_server.build_app

                def build_app_with_route(args):
                    app = _build_app(args)
                    app.include_router(router)
                    return app

                api_server.build_app = build_app_with_route
            '''),
    Case("skyrl-sleep-load-model",
         (SKYRL, "skyrl/backends/skyrl_train/inference_servers/vllm_worker.py", "e58343981"),
         "copy in a factory: both context managers entered (`and` became a tuple)", "0.16.0",
         want={"Worker.load_model": ["replace"]}, name="sleep_mode.load_model",
         replaces="vllm.v1.worker.gpu_worker:Worker.load_model",
         source='''
            def sleep_mode():
                import os

                from vllm.config import set_current_vllm_config
                from vllm.v1.worker.gpu_worker import Worker

                def load_model(self) -> None:
                    eep_scale_up = os.environ.get("VLLM_ELASTIC_EP_SCALE_UP_LAUNCH") == "1"
                    # enter both managers: `a and b` entered only b
                    with (self._maybe_get_memory_pool_context(tag="weights"),
                          set_current_vllm_config(self.vllm_config)):
                        self.model_runner.load_model(eep_scale_up=eep_scale_up)

                Worker.load_model = load_model
            '''),
    # ------------------------------------------------------------------- site-packages text patches
    Case("prime-qwen35-moe-2d-lora", PRIME, "class attribute flipped (a monkeypatch `Cls.attr = False`)",
         "0.24.0", want={"Qwen3_5MoeForConditionalGeneration": ["replace"]},
         path="vllm/model_executor/models/qwen3_5.py",
         edits=[("    is_3d_moe_weight: bool = True\n", "    is_3d_moe_weight: bool = False\n")]),
    Case("nemo-ray-init-workers-runtime-env", NEMO_P, "one call gains a keyword argument", "0.25.1",
         want={"RayDistributedExecutor._init_executor": ["replace"]}, path="vllm/v1/executor/ray_executor.py",
         edits=[("        self._init_workers_ray(placement_group)\n",
                 '        self._init_workers_ray(placement_group,\n'
                 '                               runtime_env={"py_executable": "/opt/venv/bin/python"})\n')]),
    Case("gaudi-granite-layer-aliases", GAUDI, "two entries added to a module-level dict", "0.25.1",
         want={"<module>": ["replace"]}, path="vllm/model_executor/models/granitemoehybrid.py",
         edits=[('    "mamba": GraniteMoeHybridMambaDecoderLayer,\n}\n',
                 '    "mamba": GraniteMoeHybridMambaDecoderLayer,\n    # newer configs name the layer types so\n'
                 '    "full_attention": GraniteMoeHybridAttentionDecoderLayer,\n'
                 '    "linear_attention": GraniteMoeHybridMambaDecoderLayer,\n}\n')]),
    Case("skyrl-hybrid-kv-wake", (SKYRL, "skyrl/backends/skyrl_train/patches/vllm/patch_hybrid_fp8_kv_wake.py",
                                  "6ecd004df"),
         "a loop rewritten for entries that are lists of tensors", "0.26.0",
         want={"GPUModelRunner.init_fp8_kv_scales": ["replace"]}, path="vllm/v1/worker/gpu_model_runner.py",
         edits=[("        for cache_tensor in kv_caches:\n            if cache_tensor is not None:\n"
                 "                cache_tensor.zero_()\n",
                 "        for entry in kv_caches:\n            # hybrid layers keep a list of state tensors\n"
                 "            for tensor in entry if isinstance(entry, list) else [entry]:\n"
                 "                if tensor is not None:\n                    tensor.zero_()\n")]),
    Case("skyrl-numel-loaded-cap", (SKYRL, "skyrl/backends/skyrl_train/inference_servers/layerwise_reload.py",
                                    "fedc0b76c"),
         "the returned count capped at the parameter's size", "0.23.0",
         want={"get_numel_loaded": ["replace"]}, path="vllm/model_executor/model_loader/reload/meta.py",
         edits=[("    return counter.copied_numel, return_value\n",
                 "    numel = counter.copied_numel\n    param = args.arguments.get(\"param\")\n"
                 "    if isinstance(param, torch.Tensor):\n        numel = min(numel, param.numel())\n"
                 "    return numel, return_value\n")]),
    Case("genesis-pn362-force-first-config",
         (GENESIS, "sndr/engines/vllm/patches/kernels/pn362_triton_force_first_config.py", "dfffdad749"),
         "a block appended to a module, ending with a comment line", "0.23.0",
         want={"<module>": ["insert", "footer"]}, path="vllm/env_override.py",
         edits=[("\n\n_patch_inductor_fallback_allow_list()\n",
                 "\n\n_patch_inductor_fallback_allow_list()\n\n"
                 "if os.environ.get(\"VLLM_TRITON_FORCE_FIRST_CONFIG\") == \"1\":\n"
                 "    os.environ.setdefault(\"TRITON_PRINT_AUTOTUNING\", \"0\")\n"
                 "# --- end of the first-config block ---\n")]),
    Case("gaudi-shm-check-noop-diff", GAUDI, "a bare `return` inserted first (vLLM returns in a branch too)",
         "0.27.1", want={"check_shm_free_space": ["insert"]},
         path="vllm/distributed/device_communicators/shm_broadcast.py",
         edits=[("    \"\"\"\n    if not os.path.isdir(shm_path):\n",
                 "    \"\"\"\n    # tmpfs allocates lazily: no eager check\n    return\n"
                 "    if not os.path.isdir(shm_path):\n")]),
    Case("prime-fp32-lm-head-import",
         PRIME, "an import added after the blank line that ends an import group", "0.24.0",
         want={"<module>": ["insert"]}, path="vllm/model_executor/layers/logits_processor.py",
         edits=[("import torch\n\nfrom vllm.distributed import (",
                 "import torch\n\nfrom vllm.config import get_current_vllm_config\nfrom vllm.distributed import (")]),
    Case("nemo-eagle3-own-lm-head", NEMO_P, "a statement inserted after a multi-line statement", "0.25.1",
         want={"Eagle3LlamaForCausalLM.__init__": ["insert"]}, path="vllm/model_executor/models/llama_eagle3.py",
         edits=[('            prefix=maybe_prefix(prefix, "lm_head"),\n        )\n',
                 '            prefix=maybe_prefix(prefix, "lm_head"),\n        )\n'
                 '        self.has_own_lm_head = self.config.draft_vocab_size != self.config.vocab_size\n')]),
    Case("genesis-pn28-merge-nan-guard",
         (GENESIS, "sndr/engines/vllm/patches/kernels/pn28_merge_attn_states_nan_guard.py", "dfffdad749"),
         "a guard inserted after a blank line, a sum given an epsilon", "0.23.0",
         want={"merge_attn_states_kernel": ["insert", "replace"]},
         path="vllm/v1/attention/ops/triton_merge_attn_states.py",
         edits=[("    max_lse = tl.maximum(p_lse, s_lse)\n    p_lse = p_lse - max_lse\n",
                 "    max_lse = tl.maximum(p_lse, s_lse)\n\n    # both -inf: a finite floor keeps the difference -inf\n"
                 "    max_lse = tl.where(max_lse == float(\"-inf\"), -1e30, max_lse)\n\n    p_lse = p_lse - max_lse\n"),
                ("    out_se = p_se + s_se\n", "    out_se = p_se + s_se + 1e-10\n")]),
]

for _c in CASES:  # the dispatching wrapper lives in the same factory module as its refused sibling
    if _c.id == "prime-fp32-lm-head-logits":
        _c.source = next(x.source for x in CASES if x.id == "prime-fp32-lm-head-init")


@dataclass
class Outcome:
    """What the importer made of one case: ``ops`` per anchor qualname (written and verified),
    or the one-line refusal; the plan's runtime names; the replaces that only insert."""

    ops: dict[str, list[str]] | None
    refusal: str = ""
    runtime_names: list[str] = field(default_factory=list)
    inserts_as_replaces: list[str] = field(default_factory=list)


def _inserts_as_replaces(ops_by_anchor: dict[str, list[dict]]) -> list[str]:
    """``replace`` operations whose old statements all stay, in order, among the new ones: an
    insertion encoded as a replacement (issue 37 item 4, the record branch's)."""
    out = []
    for qualname, ops in ops_by_anchor.items():
        for op in ops:
            if op["op"] != "replace" or not op.get("old", "").strip():
                continue
            try:
                old = [ast.dump(s) for s in ast.parse(textwrap.dedent(op["old"])).body]
                new = [ast.dump(s) for s in ast.parse(textwrap.dedent(op["new"])).body]
            except SyntaxError:
                continue
            it = iter(new)
            if len(new) > len(old) and all(any(o == n for n in it) for o in old):
                out.append(f"{qualname}: {op['old'].strip().splitlines()[0][:60]}")
    return out


def run(case: Case, root, fixed: bool = False) -> Outcome:  # noqa: ANN001 - a pathlib.Path
    """Import ``case`` (its hand fix with ``fixed``) through ``patchq import`` (the command's
    code) into a new series under ``root``: written and verified, or refused (one line)."""
    from patchq import series as series_mod
    from patchq.commands import import_
    from patchq.errors import ImportRefused, PatchqError
    from patchq.plan import diffs
    from patchq.vllmdist.sources import release_source

    (root / "series").mkdir(parents=True)
    (root / "series" / "profiles.toml").write_text("[profiles.default]\npatches = []\n")
    series = series_mod.load(root / "series")
    try:
        if case.path:
            text = release_source(case.release).read_text(case.path) or ""
            new = text
            for old, repl in (case.fixed if fixed and isinstance(case.fixed, list) else case.edits):
                assert new.count(old) == 1, (case.id, old)
                new = new.replace(old, repl)
            diff = root / f"{case.id}.diff"
            diff.write_text(diffs.unified(case.path, text, new))
            import_.run(series, str(diff), case.id, release=case.release)
        else:
            src = root / f"{case.id.replace('-', '_')}.py"
            src.write_text(source_text(case, case.fixed if fixed and isinstance(case.fixed, str) else None))
            import_.run(series, None, case.id, release=case.release, replacement=f"{src}:{case.name}",
                        replaces=case.replaces)
    except (ImportRefused, PatchqError) as exc:
        return Outcome(None, f"{type(exc).__name__}: {exc}" if not isinstance(exc, ImportRefused) else str(exc))
    patch = series_mod.load(root / "series").patch(case.id)
    module = sys.modules.get("patchq_series_" + case.id.replace("-", "_"))
    ops_table = getattr(module, "OPS", {}) if module is not None else {}
    by_qualname: dict[str, list[dict]] = {}
    for anchor, ops in ops_table.items():
        by_qualname.setdefault(patch.anchors[anchor].qualname, []).extend(ops)
    return Outcome({q: [o["op"] for o in ops] for q, ops in by_qualname.items()}, "", list(patch.runtime_names),
                   _inserts_as_replaces(by_qualname))


def main(argv: list[str]) -> int:
    """``python tests/testing/monkeypatch_corpus.py``: import every case, print a row per case
    and the totals (the corpus table of docs/import.md; run it on another checkout with
    ``PYTHONPATH=<checkout>`` first to compare)."""
    import tempfile
    from pathlib import Path

    rows = []
    for case in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            got = run(case, Path(tmp) / "c")
            fix = run(case, Path(tmp) / "f", fixed=True) if case.fixed is not None and got.ops is None else None
        if got.ops is not None and got.ops == case.want and not got.runtime_names:
            verdict = "clean"
        elif got.ops is not None:
            verdict = "runtime-names" if got.runtime_names else "other-ops"
        elif fix is not None and fix.ops == case.fixed_want and not fix.runtime_names:
            verdict = "hand-fixed"
        else:
            verdict = "refused"
        rows.append((case, verdict, got))
        ops = "; ".join(f"{q}: {', '.join(o)}" for q, o in (got.ops or {}).items())
        extra = f" runtime_names={got.runtime_names}" if got.runtime_names else ""
        extra += f" inserts-as-replaces={len(got.inserts_as_replaces)}" if got.inserts_as_replaces else ""
        print(f"{case.id:40} {verdict:13} {ops or got.refusal[:110]}{extra}")
    counts = {v: sum(r[1] == v for r in rows) for v in ("clean", "hand-fixed", "refused", "runtime-names",
                                                         "other-ops")}
    iar = sum(len(r[2].inserts_as_replaces) for r in rows)
    print(f"{len(rows)} changes: " + ", ".join(f"{v} {n}" for v, n in counts.items())
          + f"; clean {counts['clean'] / len(rows):.0%}; written with a name the runtime lacks "
          f"{counts['runtime-names']}; insertions encoded as replacements {iar}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
