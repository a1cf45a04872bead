# SPDX-License-Identifier: Apache-2.0

import asyncio
import logging
from http import HTTPStatus

import uvloop
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from vllm.entrypoints.openai.api_server import build_app as _original_build_app
from vllm.entrypoints.openai.api_server import run_server
from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.entrypoints.openai.completion.api_router import (
    create_completion as original_create_completion,
)
from vllm.entrypoints.openai.completion.protocol import CompletionRequest
from vllm.entrypoints.openai.engine.protocol import ErrorResponse, OpenAIBaseModel
from vllm.entrypoints.openai.utils import validate_json_request
from vllm.entrypoints.utils import cli_env_setup, load_aware_call, with_cancellation
from vllm.logger import init_logger
from vllm.lora.request import LoRARequest
from vllm.utils.argparse_utils import FlexibleArgumentParser

# AReaL's own router for custom endpoints (replaces vLLM's removed global router)
router = APIRouter()

# (excerpt: the module's first 25 lines, its imports and router, from inclusionAI/AReaL at
# commit 4aef98d8d818af55b43621aaadba047ae10f4e77; the rest of the file is left out)
