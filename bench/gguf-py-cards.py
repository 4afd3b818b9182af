# python3 bench/gguf-py-cards.py <llama.cpp source dir> > test/convert/fixtures/model-cards.json
#
# Records the general.* keys llama.cpp's converter writes for a folder holding a model card
# (README.md with YAML front matter), config.json and a model of a given size: gguf-py's
# Metadata.load, the converter's fallbacks (prepare_metadata: name from the folder, size label from
# the parameter count), then set_gguf_meta_model into a GGUFWriter whose keys, types and values are
# printed in order. test/convert/model-card.test.ts checks src/convert/general-metadata.ts against it.
# Needs PyYAML (Debian: python3-yaml) and numpy.
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, f'{sys.argv[1]}/gguf-py')
import gguf  # noqa: E402
from gguf.metadata import Metadata  # noqa: E402

# Cards shaped like those on the Hub (written for this test), and the awkward cases gguf-py handles.
CASES = [
    ('Qwen2.5-0.5B-Instruct', 494_032_768, None, """---
license: apache-2.0
license_link: https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct/blob/main/LICENSE
language:
- en
pipeline_tag: text-generation
base_model: Qwen/Qwen2.5-0.5B
tags:
- chat
library_name: transformers
---

# Qwen2.5-0.5B-Instruct

A card body that is not front matter.
"""),
    ('Llama-3.2-1B-Instruct', 1_235_814_400, {'_name_or_path': 'meta-llama/Llama-3.2-1B-Instruct'}, """---
language:
- en
- de
- fr
- it
- pt
- hi
- es
- th
library_name: transformers
license: llama3.2
pipeline_tag: text-generation
tags:
- facebook
- meta
- pytorch
- llama
- llama-3
extra_gated_prompt: >-
  ### LICENSE AGREEMENT

  A folded block scalar over
  several lines, with "quotes" and: colons.
extra_gated_fields:
  First Name: text
  Date of birth: date_picker
  Country: country
  Job title:
    type: select
    options:
    - Student
    - Researcher
    - label: Other
      value: other
  geo: ip_location
  ? By clicking Submit below I accept the terms
  : checkbox
extra_gated_description: The information you provide will be collected.
extra_gated_button_content: Submit
---
"""),
    ('SmolLM2-135M-Instruct', 134_515_008, None, """---
library_name: transformers
license: apache-2.0
language:
- en
pipeline_tag: text-generation
tags:
- safetensors
- onnx
- transformers.js
base_model:
- HuggingFaceTB/SmolLM2-135M
---
"""),
    # A merge: base models as Hub ids, a Hub URL, another URL and a mapping; datasets likewise;
    # TheBloke-style model_name / model_creator / model_type and the card's own quantized_by.
    ('merged-model', 7_241_732_096, None, """---
base_model:
- mistralai/Mistral-7B-Instruct-v0.2
- https://huggingface.co/teknium/OpenHermes-2.5-Mistral-7B
- https://example.com/models/secret-sauce
- {name: Local Merge Input, author: Someone, version: v3, url: https://example.com/x, doi: 10.1234/abc, uuid: 1234-abcd, repo_url: https://git.example.com/x, description: A model}
datasets:
- teknium/OpenHermes-2.5
- https://huggingface.co/datasets/Open-Orca/SlimOrca
- https://huggingface.co/Open-Orca/OpenOrca
- {name: Private set, organization: Acme}
model_name: Mistral 7B Merge 14 v0.1
model_creator: EmbeddedLLM
model_type: mistral
quantized_by: nobody
license: cc-by-nc-4.0
tags: [merge, mergekit]
language: en
---
"""),
    # llama.cpp's own keys in a card win over the folder name and _name_or_path.
    ('folder-name-7B', 6_738_415_616, {'_name_or_path': 'org/Other-Name-13B-Chat'}, """---
name: Card Name
author: Card Author
version: v9
organization: Card Org
description: What the card says the model is.
finetune: Card-Tune
basename: card-base
size_label: 7x1B
source_url: https://example.com/src
source_doi: 10.1/src
source_uuid: abc-123
source_repo_url: https://example.com/src.git
license_name: custom license
license_link: https://example.com/license
license: [mit, apache-2.0]
languages: [fr]
language: [en]
tags: [a, b]
pipeline_tag: text-generation
dataset_sources: some/dataset
---
"""),
    # model_* spellings (used only where the plain ones are absent), and base_models / datasets singular forms.
    ('x-model', 0, None, """---
model_name: Spelled Name
model_author: Spelled Author
model_version: '2.0'
model_organization: Spelled Org
model_description: spelled description
model_finetune: spelled-ft
model_basename: spelled-base
model_size_label: 3B
model_url: https://example.com/u
model_doi: 10.2/u
model_uuid: u-1
model_repo_url: https://example.com/u.git
base_models: org-a/Model-A-1B-v2
dataset: org-b/Data-B
---
"""),
    # The Norway problem: a list item "no" stays a language; a scalar "no" is False (no languages key).
    ('norwegian-model', 124_439_808, None, """---
language:
- en
- no
- nb
tags:
  - no
---
"""),
    ('no-scalar', 124_439_808, None, """---
language: no
license: mit
---
"""),
    # Tabs for indentation (seen on a Qwen3 card): gguf-py turns them into spaces first.
    ('Qwen3-tabs', 0, None, "---\nlicense: apache-2.0\ntags:\n\t- chat\n\t- qwen\npipeline_tag: text-generation\n---\n"),
    # Windows line endings.
    ('crlf-model', 0, None, "---\r\nlicense: mit\r\nlanguage:\r\n- en\r\n---\r\nbody\r\n"),
    # No front matter, front matter not first, a byte-order mark, a list instead of a mapping, an empty one, no end marker.
    ('plain-readme', 260_000, None, "# Title\n\n---\nlicense: mit\n---\n"),
    ('bom-readme', 260_000, None, "\ufeff---\nlicense: mit\n---\n"),
    ('list-card', 260_000, None, "---\n- license\n- mit\n---\n"),
    ('empty-card', 260_000, None, "---\n---\nbody\n"),
    ('unterminated', 260_000, None, "---\nlicense: mit\ntags: [x]\n"),
    # Null values, an empty list, quoted and plain scalars that look like other types.
    ('odd-values', 260_000, None, """---
license:
tags: []
language: ["on", 'off']
description: "line one\\nline two"
base_model: null
datasets: []
---
"""),
    # Anchors, aliases and a merge key (YAML 1.1).
    ('anchors', 260_000, None, """---
defaults: &d {license: &lic mit, tags: [x, y]}
card:
  <<: *d
license: *lic
tags: &t [p, q]
pipeline_tag: fill-mask
---
"""),
]


def record(dir_name, total, config, card):
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / dir_name
        d.mkdir()
        (d / 'README.md').write_bytes(card.encode('utf-8'))
        if config is not None:
            (d / 'config.json').write_text(json.dumps(config))
        md = Metadata.load(None, d, None, total)
        # convert_hf_to_gguf's prepare_metadata.
        if md.name is None:
            md.name = d.name
        if md.size_label is None and total > 0:
            md.size_label = gguf.size_label(total, total, 0, 0)
        w = gguf.GGUFWriter(path=None, arch='llama')
        w.add_type(gguf.GGUFType.MODEL)
        md.set_gguf_meta_model(w)
        kv = []
        for key, v in w.kv_data[0].items():
            if key == 'general.architecture':
                continue
            t = v.type.name.lower()
            if t == 'array':
                t = f'array:{v.sub_type.name.lower() if v.sub_type else gguf.GGUFValueType.get_type(v.value[0]).name.lower()}'
            kv.append([key, t, v.value])
        return kv


out = [{'dir': d, 'total': t, 'config': c, 'card': card, 'kv': record(d, t, c, card)} for d, t, c, card in CASES]
print('[\n' + ',\n'.join(' ' + json.dumps(e, ensure_ascii=False) for e in out) + '\n]')
