"""A tiny Llama built from a config (random weights) with a byte-level BPE tokenizer trained on a
few sentences here: a local model for tests of generation, nothing downloaded (STACK.md)."""

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TEXTS = ["The river town grew quickly after the railway arrived in the valley, and its market became "
         "the largest in the region within twenty years.",
         "A small observatory on the hill recorded the comet every night for three weeks before clouds "
         "covered the sky."]
CHAT = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def tiny_llama(folder: Path, chat: bool) -> Path:
    """A 2-layer Llama (hidden 64) with random weights and a byte-level BPE tokenizer trained on
    a few sentences; ``chat``: the tokenizer has a chat template."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    specials = ["<s>", "</s>"] + (["<|user|>", "<|assistant|>", "<|end|>"] if chat else [])
    raw.train_from_iterator(TEXTS * 4 + ["Paraphrase the following passage. Keep its meaning."],
                            trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, bos_token="<s>", eos_token="</s>")
    if chat:
        tok.chat_template = CHAT
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                                         max_position_embeddings=512, bos_token_id=tok.bos_token_id,
                                         eos_token_id=tok.eos_token_id))
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def sentence_llama(folder: Path) -> Path:
    """``tiny_llama(chat=True)`` whose generation config ends every answer with exactly one
    sentence: "." is the end-of-sequence token (kept in the decoded text: it is not special) and
    the token forced at the length cap, every other token holding ".", "!" or "?" and every
    special token is never sampled, and the first 3 new tokens are no end. Random weights say nothing, but each
    paraphrased sentence comes back as one non-empty sentence, so a passage paraphrased
    sentence by sentence has as many sentences as it had (and one paraphrased whole, one)."""
    from transformers import AutoTokenizer, GenerationConfig

    tiny_llama(folder, chat=True)
    tok = AutoTokenizer.from_pretrained(folder)
    dot = tok.convert_tokens_to_ids(".")
    ends = [i for i in range(len(tok)) if i != dot and (i in tok.all_special_ids or any(c in tok.decode([i])
                                                                                           for c in ".!?"))]
    GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=dot, forced_eos_token_id=dot, suppress_tokens=ends,
                     min_new_tokens=3).save_pretrained(folder)
    return folder


class ChatHandler(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/chat/completions that records each request and answers with a
    paraphrase depending on the seed (as a server honouring `seed` does)."""

    requests: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        words = body["messages"][-1]["content"].split("\n\n", 1)[1].split()
        seed = body.get("seed") or 0
        words[seed % len(words)] = words[seed % len(words)].upper()  # another word per seed
        answer = {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                  "choices": [{"index": 0, "message": {"role": "assistant",
                                                       "content": "Here is the paraphrase:\n" + " ".join(words)},
                               "finish_reason": "stop"}]}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def fake_chat_server():
    """A ``ChatHandler`` server on loopback; yields its base URL (``.../v1``)."""
    ChatHandler.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        thread.join(5)
