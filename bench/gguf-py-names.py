# python3 bench/gguf-py-names.py <llama.cpp source dir> > test/convert/fixtures/general-metadata.json
#
# Records what gguf-py (llama.cpp's converter library) derives from model names and parameter
# counts: Metadata.get_model_id_components, id_to_title, model_weight_count_rounded_notation and
# size_label. test/convert/general-metadata.test.ts checks src/convert/general-metadata.ts against it.
import json
import sys

sys.path.insert(0, f'{sys.argv[1]}/gguf-py')
from gguf.metadata import Metadata  # noqa: E402
from gguf.utility import model_weight_count_rounded_notation, size_label  # noqa: E402

B = 1_000_000_000
IDS = [
    ('meta-llama/Meta-Llama-3.1-8B-Instruct', 8 * B), ('Meta-Llama-3.1-8B-Instruct', 0), ('mistralai/Mistral-7B-Instruct-v0.3', 7_241_732_096),
    ('bigscience/bloom-7b1', 7_069_016_064), ('TinyLlama-1.1B-intermediate-step-1431k-3T', 1_100_048_384), ('Qwen/Qwen2.5-7B-Instruct-1M', 7_615_616_512),
    ('Model-400M', B), ('Model-500M', B), ('Model-100M', B), ('Model-8B', B), ('Model-1B', B), ('Model-1b', B), ('Model-1.5t', 2 * B),
    ('nous-hermes-2-mixtral-8x7b-dpo', 46_702_792_704), ('Qwen3-30B-A3B-Instruct-2507', 30_532_122_624), ('DeepSeek-R1-Distill-Qwen-1.5B', 1_777_088_000),
    ('google/gemma-2-9b-it', 9_241_705_984), ('microsoft/phi-3.5-mini-instruct', 3_821_079_552), ('SmolLM2-135M-Instruct', 134_515_008),
    ('ModernBERT-large', 395_831_296), ('pythia-small-v2', 0), ('some-model-Q4_K_M', 0), ('model-bf16', 0), ('model-f16-v1.2', 0),
    ('Hello World model', 0), ('../local-model', 0), ('./abc/def', 0), ('/abc', 0), ('x--y', 0), ('v1-model', 0), ('iter10-model-3B', 3 * B),
    ('llama-2-7b-chat-hf', 6_738_415_616), ('Llama-2-7B-32K-Instruct', 6_738_415_616), ('Yi-34B-200K', 34_388_917_248), ('Nemotron-H-8B-Base-8K', 8 * B),
    ('stablelm-2-1_6b-chat', 1_644_515_328), ('OLMoE-1B-7B-0924', 6_919_161_856), ('gpt2', 124_439_808), ('gpt2-xl', 1_557_611_200),
    ('a-Small-3B-large', 3 * B), ('Ministral-8B-Instruct-2410', 8_019_808_256), ('model-A3B', 0), ('model-vision-lora', 0), ('CHAT-chat', 0),
]
TITLES = ['qwen2.5 7b instruct', 'meta llama', 'Hello world', 'v1.2', '7b model', 'abc_def', 'gpt2-xl', 'qwen2moe', 'mixed Case words', 'ünïcode-wörds', 'x']
COUNTS = [1, 499, 500, 999, 1000, 1500, 2500, 12_500, 125, 260_000, 999_999, 1_000_001, 9_500_000, 12_500_000, 1_100_048_384, 8_030_261_248,
          70_553_706_496, 671_026_419_200, 1_000_000_000_001, 1_500_000_000_000]
LABELS = [(260_000, 260_000, 0, 0), (46_702_792_704, 1_600_000_000, 5_637_000_000, 8), (1_000_000, 200_000, 100_000, 4)]

out = {
    'components': [[i, t, list(Metadata.get_model_id_components(i, t))] for i, t in IDS],
    'titles': [[t, Metadata.id_to_title(t)] for t in TITLES],
    'counts': [[n, model_weight_count_rounded_notation(n)] for n in COUNTS],
    'labels': [[list(a), size_label(*a)] for a in LABELS],
}
print('{\n' + ',\n'.join(f' {json.dumps(k)}: [\n' + ',\n'.join(f'  {json.dumps(e, ensure_ascii=False)}' for e in v) + '\n ]' for k, v in out.items()) + '\n}')
