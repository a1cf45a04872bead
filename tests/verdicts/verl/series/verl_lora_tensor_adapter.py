"""verl-lora-tensor-adapter: verl's ``VLLMHijack.hijack`` (``hijack__load_adapter``), ported.

verl replaces ``LRUCacheWorkerLoRAManager._load_adapter`` (defined on WorkerLoRAManager) with its
own copy so that a ``TensorLoRARequest`` (an adapter synchronised from the actor as tensors)
is built with ``PEFTHelper.from_dict`` and ``LoRAModel.from_lora_tensors`` instead of from a
directory. verl's copy predates vLLM 0.24.0's method (it drops skip_prefixes, moe_ep_spec and
the 3D-layout stamp); ported as the meant change, the two ``isinstance(lora_request,
TensorLoRARequest)`` branches around vLLM's own statements, a diff on vLLM 0.24.0
(verl/utils/vllm/utils.py @ 1dda039b, which pins 0.24.0).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'workerloramanager-load-adapter': [
        {
            'op': 'replace',
            'old': """\
lora_path = get_adapter_absolute_path(lora_request.lora_path)

peft_helper = PEFTHelper.from_local_dir(
    lora_path,
    self.max_position_embeddings,
    lora_request.tensorizer_config_dict,
)
""",
            'new': """\
# verl: an adapter synchronised from the actor arrives as tensors
# (TensorLoRARequest) rather than as a directory on disk.
from verl.utils.vllm.utils import TensorLoRARequest

if isinstance(lora_request, TensorLoRARequest):
    peft_helper = PEFTHelper.from_dict(lora_request.peft_config)
else:
    lora_path = get_adapter_absolute_path(lora_request.lora_path)

    peft_helper = PEFTHelper.from_local_dir(
        lora_path,
        self.max_position_embeddings,
        lora_request.tensorizer_config_dict,
    )
""",
            'after': """\
expected_lora_modules = set(expected_lora_lst)
""",
            'before': """\
peft_helper.validate_legal(self.lora_config)
""",
        },
        {
            'op': 'replace',
            'old': """\

lora = self._lora_model_cls.from_local_checkpoint(
    lora_path,
    expected_lora_modules,
    peft_helper=peft_helper,
    lora_model_id=lora_request.lora_int_id,
    device="cpu",
    dtype=self.lora_config.lora_dtype,
    model_vocab_size=self.vocab_size,
    tensorizer_config_dict=lora_request.tensorizer_config_dict,
    weights_mapper=hf_to_vllm_mapper,
    skip_prefixes=lora_skip_prefixes,
    moe_ep_spec=self._adapter_manager.moe_ep_load_spec,
)
""",
            'new': """\

if isinstance(lora_request, TensorLoRARequest):
    lora = self._lora_model_cls.from_lora_tensors(
        tensors=lora_request.lora_tensors,
        peft_helper=peft_helper,
        lora_model_id=lora_request.lora_int_id,
        device="cpu",
        dtype=self.lora_config.lora_dtype,
        model_vocab_size=self.vocab_size,
        weights_mapper=hf_to_vllm_mapper,
    )
else:
    lora = self._lora_model_cls.from_local_checkpoint(
        lora_path,
        expected_lora_modules,
        peft_helper=peft_helper,
        lora_model_id=lora_request.lora_int_id,
        device="cpu",
        dtype=self.lora_config.lora_dtype,
        model_vocab_size=self.vocab_size,
        tensorizer_config_dict=lora_request.tensorizer_config_dict,
        weights_mapper=hf_to_vllm_mapper,
        skip_prefixes=lora_skip_prefixes,
        moe_ep_spec=self._adapter_manager.moe_ep_load_spec,
    )
""",
            'after': """\
lora_skip_prefixes = getattr(model, "lora_skip_prefixes", None)
""",
            'before': """\
lora.is_3d_lora_weight = lora_request.is_3d_lora_weight
""",
        },
    ],
}

PATCH = patch(
    id='verl-lora-tensor-adapter',
    summary='LoRA adapters can be loaded from in-memory tensors (TensorLoRARequest)',
    why="verl synchronises the actor's LoRA weights to vLLM as tensors; vLLM only loads adapters from paths.",
    upstream=['https://github.com/verl-project/verl/blob/1dda039b9c6311889a9c9a26040677e1254814f9/verl/utils/vllm/utils.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
