"""Test-bed stand-in of transformers/models/auto/configuration_auto.py: the model_type ->
config class map in transformers' own layout (a subset of 4.57's entries; no qwen3_5_moe)."""
from collections import OrderedDict

CONFIG_MAPPING_NAMES = OrderedDict[str, str](
    [
        # Add configs here
        ("bert", "BertConfig"),
        ("deepseek_v2", "DeepseekV2Config"),
        ("deepseek_v3", "DeepseekV3Config"),
        ("gemma3", "Gemma3Config"),
        ("glm", "GlmConfig"),
        ("glm4_moe", "Glm4MoeConfig"),
        ("gpt_oss", "GptOssConfig"),
        ("llama", "LlamaConfig"),
        ("mistral", "MistralConfig"),
        ("mixtral", "MixtralConfig"),
        ("qwen2", "Qwen2Config"),
        ("qwen2_moe", "Qwen2MoeConfig"),
        ("qwen2_vl", "Qwen2VLConfig"),
        ("qwen3", "Qwen3Config"),
        ("qwen3_moe", "Qwen3MoeConfig"),
        ("qwen3_next", "Qwen3NextConfig"),
        ("qwen3_vl", "Qwen3VLConfig"),
        ("qwen3_vl_moe", "Qwen3VLMoeConfig"),
    ]
)
