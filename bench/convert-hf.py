# Runs llama.cpp's convert_hf_to_gguf.py where transformers is not installed and torch is older
# (Debian 12: apt-get install python3-torch python3-sentencepiece python3-numpy python3-yaml):
#   python3 bench/convert-hf.py <llama.cpp source dir> <convert_hf_to_gguf.py arguments...>
# Without transformers the converter reads config.json as it is (its own fallback) and cannot build
# byte-level BPE vocabularies: the checkpoints given to it carry a SentencePiece tokenizer.model,
# which every text model's vocabulary step is pointed at here.
import runpy
import sys
import types

src = sys.argv[1]
shim = types.ModuleType('transformers')


class _Unavailable:
    @staticmethod
    def from_pretrained(*args, **kwargs):
        raise RuntimeError('transformers is not installed')


shim.AutoConfig = shim.AutoTokenizer = _Unavailable
sys.modules['transformers'] = shim

import torch  # noqa: E402

# torch 1.13 predates these dtypes; the converter only names them in tables.
for name in ['float8_e4m3fn', 'float8_e5m2', 'float8_e4m3fnuz', 'float8_e5m2fnuz', 'float8_e8m0fnu', 'float4_e2m1fn_x2', 'uint16', 'uint32', 'uint64']:
    if not hasattr(torch, name):
        setattr(torch, name, type(name, (), {})())

sys.path[:0] = [src, f'{src}/gguf-py']
import conversion.base as base  # noqa: E402

base.TextModel._set_vocab_gpt2 = lambda self: self._set_vocab_sentencepiece()
base.TextModel._set_vocab_qwen = lambda self: self._set_vocab_sentencepiece()
sys.argv = ['convert_hf_to_gguf.py'] + sys.argv[2:]
runpy.run_path(f'{src}/convert_hf_to_gguf.py', run_name='__main__')
