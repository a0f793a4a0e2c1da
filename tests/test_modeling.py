"""Model package: architectures, heads, attention backends, differential tests, Auto loading in-process and as remote
code."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import transformers
from torch.testing import assert_close
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)
from transformers.loss.loss_utils import ForCausalLMLoss, ForMaskedLMLoss

from modeling_eurobert import (
    EuroBertClmMlmConfig,
    EuroBertClmMlmForCausalLM,
    EuroBertClmMlmForMaskedLM,
    EuroBertClmMlmForQuestionAnswering,
    EuroBertClmMlmForSequenceClassification,
    EuroBertClmMlmForTokenClassification,
    EuroBertClmMlmModel,
    load_architecture,
)
from tests.fixtures.fresh_process import HIDE_PROJECT, run_fresh

BATCH, SEQ = 13, 7
HEADS = {
    "AutoModel": (AutoModel, EuroBertClmMlmModel),
    "AutoModelForMaskedLM": (AutoModelForMaskedLM, EuroBertClmMlmForMaskedLM),
    "AutoModelForCausalLM": (AutoModelForCausalLM, EuroBertClmMlmForCausalLM),
    "AutoModelForSequenceClassification": (AutoModelForSequenceClassification, EuroBertClmMlmForSequenceClassification),
    "AutoModelForTokenClassification": (AutoModelForTokenClassification, EuroBertClmMlmForTokenClassification),
    "AutoModelForQuestionAnswering": (AutoModelForQuestionAnswering, EuroBertClmMlmForQuestionAnswering),
}


def tiny_config(**overrides) -> EuroBertClmMlmConfig:
    # STYLE §7 tiny config; 4 heads / 2 kv heads keeps GQA exercised.
    kwargs = dict(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=37,
        bos_token_id=0,
        eos_token_id=1,
        mask_token_id=2,
        pad_token_id=3,
        num_labels=3,
    )
    kwargs.update(overrides)
    return EuroBertClmMlmConfig(**kwargs)


def batch(vocab=99, pad_last=True):
    input_ids = torch.randint(4, vocab, (BATCH, SEQ))
    attention_mask = torch.ones_like(input_ids)
    if pad_last:  # right padding on a few rows
        attention_mask[-3:, -2:] = 0
    return input_ids, attention_mask


def main_output(output):
    if getattr(output, "logits", None) is not None:
        return output.logits
    if getattr(output, "start_logits", None) is not None:
        return torch.stack([output.start_logits, output.end_logits])
    return output.last_hidden_state


@pytest.mark.parametrize("name,params", [("210m", 211.8), ("610m", 607.9), ("1b", 1187.9)])
def test_paper_architectures_match_spec_parameter_counts(name, params):
    config = load_architecture(name)
    with torch.device("meta"):
        model = EuroBertClmMlmModel(config)  # input embeddings included, LM head excluded
    assert round(sum(p.numel() for p in model.parameters()) / 1e6, 1) == params
    assert config.rms_norm_eps == 1e-5 and config.rope_parameters["rope_theta"] == 10000.0
    assert config.vocab_size == 128256 and config.mask_token_id == 128002 and config.pad_token_id != config.eos_token_id
    assert config.max_position_embeddings == 2048 and not config.tie_word_embeddings


def test_bad_architectures_raise_one_line_errors():
    with pytest.raises(ValueError, match="unknown architecture 'huge'"):
        load_architecture("huge")
    with pytest.raises(Exception, match="not divisible by num_attention_heads"):
        tiny_config(hidden_size=30)
    with pytest.raises(Exception, match="not a multiple of num_key_value_heads"):
        tiny_config(num_attention_heads=4, num_key_value_heads=3)


@pytest.mark.parametrize("head", list(HEADS))
def test_head_shapes_and_loss(head):
    model = HEADS[head][1](tiny_config()).eval()
    input_ids, attention_mask = batch()
    output = model(input_ids, attention_mask=attention_mask)
    expected = {
        "AutoModel": (BATCH, SEQ, 32),
        "AutoModelForMaskedLM": (BATCH, SEQ, 99),
        "AutoModelForCausalLM": (BATCH, SEQ, 99),
        "AutoModelForSequenceClassification": (BATCH, 3),
        "AutoModelForTokenClassification": (BATCH, SEQ, 3),
        "AutoModelForQuestionAnswering": (2, BATCH, SEQ),
    }[head]
    assert main_output(output).shape == expected
    labels = {
        "AutoModelForMaskedLM": {"labels": torch.where(torch.rand(BATCH, SEQ) < 0.4, input_ids, -100)},
        "AutoModelForCausalLM": {"labels": input_ids},
        "AutoModelForSequenceClassification": {"labels": torch.randint(0, 3, (BATCH,))},
        "AutoModelForTokenClassification": {"labels": torch.randint(0, 3, (BATCH, SEQ))},
        "AutoModelForQuestionAnswering": {
            "start_positions": torch.zeros(BATCH, dtype=torch.long),
            "end_positions": torch.ones(BATCH, dtype=torch.long),
        },
    }.get(head)
    if labels:
        loss = model(input_ids, attention_mask=attention_mask, **labels).loss
        assert torch.isfinite(loss) and loss.ndim == 0


@pytest.mark.parametrize("pooling", ["bos", "mean", "late"])
def test_sequence_classification_pooling_ignores_padding(pooling):
    model = EuroBertClmMlmForSequenceClassification(tiny_config(classifier_pooling=pooling)).eval()
    input_ids, _ = batch(pad_last=False)
    padded = torch.cat([input_ids, torch.full((BATCH, 3), 3)], dim=1)
    mask = torch.cat([torch.ones(BATCH, SEQ), torch.zeros(BATCH, 3)], dim=1).long()
    assert_close(model(padded, attention_mask=mask).logits, model(input_ids).logits, atol=1e-5, rtol=1e-5)


def test_attention_pattern_is_decided_by_config_and_overridable_per_call():
    model = EuroBertClmMlmModel(tiny_config()).eval()
    input_ids, _ = batch(pad_last=False)
    changed = input_ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 99
    with torch.no_grad():
        causal = [model(ids, is_causal=True).last_hidden_state for ids in (input_ids, changed)]
        bidirectional = [model(ids).last_hidden_state for ids in (input_ids, changed)]
    # Causal: changing the last token leaves every earlier position untouched; bidirectional: it does not.
    assert_close(causal[0][:, :-1], causal[1][:, :-1])
    assert not torch.allclose(bidirectional[0][:, :-1], bidirectional[1][:, :-1])
    model.config.is_causal = True
    with torch.no_grad():
        assert_close(model(input_ids).last_hidden_state, causal[0])


@pytest.mark.parametrize("config_causal", [False, True])
def test_a_per_call_attention_holds_with_a_padding_mask(config_causal):
    """`is_causal=` per call wins over the config with padded batches too: transformers builds a bidirectional mask
    from a config saying is_causal=False, so a causal call on a bidirectional config once attended both ways whenever
    an attention mask was passed (a frozen decoder's features were silently bidirectional)."""
    model = EuroBertClmMlmModel(tiny_config(is_causal=config_causal)).eval()
    input_ids, attention_mask = batch()
    with torch.no_grad():
        for causal in (True, False):
            padded = model(input_ids, attention_mask=attention_mask, is_causal=causal).last_hidden_state
            for row in (0, BATCH - 1):  # a full row and a padded one, each alone without a mask
                n = int(attention_mask[row].sum())
                alone = model(input_ids[row : row + 1, :n], is_causal=causal).last_hidden_state
                assert_close(padded[row : row + 1, :n], alone)


def test_models_built_from_one_config_stay_independent(tmp_path):
    """Each LM head records its own attention pattern on a copy of the config it is handed."""
    config = tiny_config()
    clm, mlm = EuroBertClmMlmForCausalLM(config), EuroBertClmMlmForMaskedLM(config)
    assert clm.config.is_causal is True and mlm.config.is_causal is False and config.is_causal is False
    assert clm.config is not config and mlm.config is not clm.config
    clm.save_pretrained(tmp_path / "clm")
    mlm.save_pretrained(tmp_path / "mlm")
    assert json.loads((tmp_path / "clm" / "config.json").read_text())["is_causal"] is True
    assert json.loads((tmp_path / "mlm" / "config.json").read_text())["is_causal"] is False


def test_lm_heads_agree_on_a_clm_step():
    """The CLM head and the MLM head called causally give the same loss on the same labels (the input ids)."""
    torch.manual_seed(0)
    clm = EuroBertClmMlmForCausalLM(tiny_config()).eval()
    mlm = EuroBertClmMlmForMaskedLM(tiny_config()).eval()
    mlm.load_state_dict(clm.state_dict())
    input_ids, _ = batch(pad_last=False)
    with torch.no_grad():
        assert_close(clm(input_ids, labels=input_ids).loss, mlm(input_ids, labels=input_ids, is_causal=True).loss)


def test_clm_checkpoint_loads_into_mlm_class_and_back(tmp_path):
    clm = EuroBertClmMlmForCausalLM(tiny_config(is_causal=True))
    clm.save_pretrained(tmp_path / "clm")
    mlm, info = EuroBertClmMlmForMaskedLM.from_pretrained(tmp_path / "clm", output_loading_info=True)
    assert info["missing_keys"] == set() or not info["missing_keys"]
    assert not info["unexpected_keys"] and not info["mismatched_keys"]
    assert set(mlm.state_dict()) == set(clm.state_dict())
    for key, value in clm.state_dict().items():
        assert torch.equal(value, mlm.state_dict()[key]), key
    mlm.save_pretrained(tmp_path / "mlm")
    back, info = AutoModelForCausalLM.from_pretrained(tmp_path / "mlm", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert isinstance(back, EuroBertClmMlmForCausalLM)


@pytest.mark.parametrize("causal", [False, True])
def test_labelled_positions_loss_equals_full_vocab_loss_and_gradients(causal):
    torch.manual_seed(0)
    model_class = EuroBertClmMlmForCausalLM if causal else EuroBertClmMlmForMaskedLM
    model = model_class(tiny_config()).train()
    input_ids, _ = batch(pad_last=False)
    labels = input_ids if causal else torch.where(torch.rand(BATCH, SEQ) < 0.4, input_ids, -100)
    for num_items in (None, torch.tensor(50)):
        model.zero_grad()
        loss = model(input_ids, labels=labels, num_items_in_batch=num_items).loss
        loss.backward()
        ours = {n: p.grad.clone() for n, p in model.named_parameters()}
        model.zero_grad()
        logits = model(input_ids).logits  # full (B, T, V) logits
        reference_fn = ForCausalLMLoss if causal else ForMaskedLMLoss
        reference = reference_fn(logits, labels, vocab_size=99, num_items_in_batch=num_items)
        reference.backward()
        assert_close(loss, reference, atol=1e-6, rtol=1e-5)
        for name, param in model.named_parameters():
            assert_close(ours[name], param.grad, atol=1e-6, rtol=1e-5, msg=name)


def padded_positions(labels, width):
    """(B, width): each row's labelled positions in increasing order, then -1 (the collator's `mlm_positions`)."""
    positions = torch.full((labels.shape[0], width), -1)
    for row, labelled in enumerate(labels != -100):
        found = labelled.nonzero().flatten()
        positions[row, : len(found)] = found
    return positions


def loss_and_grads(model, **inputs):
    model.zero_grad()
    loss = model(**inputs).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_fixed_shape_head_equals_exact_path_and_full_vocab_loss():
    """`mlm_positions` (a fixed K per row, padded with -1) gives the exact path's and full logits' loss and grads."""
    model = EuroBertClmMlmForMaskedLM(tiny_config()).train()
    input_ids, _ = batch(pad_last=False)
    labels = torch.where(torch.rand(BATCH, SEQ) < 0.4, input_ids, -100)
    labels[0] = -100  # a row without any label: only padding slots
    positions = padded_positions(labels, SEQ)  # K = SEQ: room for every position
    for num_items in (None, torch.tensor(50)):
        exact = loss_and_grads(model, input_ids=input_ids, labels=labels, num_items_in_batch=num_items)
        fixed = loss_and_grads(
            model, input_ids=input_ids, labels=labels, num_items_in_batch=num_items, mlm_positions=positions
        )
        model.zero_grad()
        reference = ForMaskedLMLoss(model(input_ids).logits, labels, vocab_size=99, num_items_in_batch=num_items)
        reference.backward()
        for loss, grads in (exact, fixed):
            assert_close(loss, reference.detach(), atol=1e-6, rtol=1e-5)
            for name, param in model.named_parameters():
                assert_close(grads[name], param.grad, atol=1e-6, rtol=1e-5, msg=name)
    assert model(input_ids, labels=labels, mlm_positions=positions).logits is None


def test_causal_calls_project_every_position_with_the_same_loss():
    """The MLM class on a CLM step (is_causal, labels = the input ids, shifted by the model) takes the static
    all-positions path: same loss and gradients as full logits and transformers' causal LM loss."""
    model = EuroBertClmMlmForMaskedLM(tiny_config()).train()
    input_ids, _ = batch(pad_last=False)
    loss, grads = loss_and_grads(model, input_ids=input_ids, labels=input_ids, is_causal=True)
    model.zero_grad()
    reference = ForCausalLMLoss(model(input_ids, is_causal=True).logits, input_ids, vocab_size=99)
    reference.backward()
    assert_close(loss, reference.detach(), atol=1e-6, rtol=1e-5)
    for name, param in model.named_parameters():
        assert_close(grads[name], param.grad, atol=1e-6, rtol=1e-5, msg=name)


def capped_labels(max_per_row: int, seed: int):
    """MLM-like labels with at most `max_per_row` labelled positions per row."""
    generator = torch.Generator().manual_seed(seed)
    labelled = torch.rand(BATCH, SEQ, generator=generator) < 0.4
    labelled &= labelled.cumsum(dim=1) <= max_per_row
    return torch.where(labelled, torch.randint(0, 99, (BATCH, SEQ), generator=generator), -100)


def static_shapes(graph_module) -> bool:
    """Whether every tensor dynamo traced has a concrete shape (no data-dependent size)."""
    values = [node.meta.get("example_value") for node in graph_module.graph.nodes]
    return all(isinstance(d, int) for v in values if isinstance(v, torch.Tensor) for d in v.shape)


def test_fixed_shape_head_traces_to_one_static_graph():
    """With `mlm_positions` the loss traces as one graph of static shapes (no data-dependent size, hence no host sync
    on a GPU), reused by new masks with the same K; the exact path's `labels != -100` selection has a
    data-dependent size."""
    from modeling_eurobert.modeling_eurobert import labelled_positions_loss

    graphs = []

    def capture(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    lm_head = torch.nn.Linear(32, 99, bias=False)
    hidden = torch.randn(BATCH, SEQ, 32, requires_grad=True)
    fixed = torch.compile(labelled_positions_loss, backend=capture, fullgraph=True, dynamic=False)
    for seed in (0, 1):
        labels = capped_labels(4, seed)
        got = fixed(hidden, lm_head, labels, False, torch.tensor(20), padded_positions(labels, 4))
        expected = labelled_positions_loss(hidden, lm_head, labels, False, torch.tensor(20))
        assert_close(got, expected, atol=1e-6, rtol=1e-5)
        assert_close(torch.autograd.grad(got, hidden)[0], torch.autograd.grad(expected, hidden)[0])
    assert len(graphs) == 1 and static_shapes(graphs[0])
    torch._dynamo.reset()
    exact = torch.compile(labelled_positions_loss, backend=capture, fullgraph=True, dynamic=False)
    exact(hidden, lm_head, capped_labels(4, 0), False)
    assert len(graphs) == 2 and not static_shapes(graphs[1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="host syncs are a GPU matter")
def test_fixed_shape_head_needs_no_host_sync_on_gpu():
    model = EuroBertClmMlmForMaskedLM(tiny_config()).cuda().train()
    labels = capped_labels(4, 0)
    inputs = {
        "input_ids": torch.where(labels == -100, 5, labels).cuda(),
        "labels": labels.cuda(),
        "mlm_positions": padded_positions(labels, 4).cuda(),
        "num_items_in_batch": torch.tensor(20).cuda(),
    }
    model(**inputs).loss.backward()  # warm-up: lazy initialisations may sync once
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any synchronising CUDA call raises until reset
    try:
        model(**inputs).loss.backward()
        with pytest.raises(RuntimeError, match="synchroniz"):
            model(**{k: v for k, v in inputs.items() if k != "mlm_positions"})  # exact path: boolean selection
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_matches_eager(causal):
    config = tiny_config()
    sdpa = EuroBertClmMlmForMaskedLM(config).eval()
    eager = EuroBertClmMlmForMaskedLM.from_pretrained(
        None, config=config, state_dict=sdpa.state_dict(), attn_implementation="eager"
    ).eval()
    assert sdpa.config._attn_implementation == "sdpa" and eager.config._attn_implementation == "eager"
    input_ids, attention_mask = batch()
    with torch.no_grad():
        a = sdpa(input_ids, attention_mask=attention_mask, is_causal=causal).logits
        b = eager(input_ids, attention_mask=attention_mask, is_causal=causal).logits
    valid = attention_mask.bool()
    assert_close(a[valid], b[valid], atol=1e-5, rtol=1e-5)


def test_causal_mode_matches_llama():
    config = tiny_config(is_causal=True)
    ours = EuroBertClmMlmForCausalLM(config).eval()
    llama_config = transformers.LlamaConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=37,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    )
    llama = transformers.LlamaForCausalLM(llama_config).eval()
    missing, unexpected = llama.load_state_dict(ours.state_dict(), strict=True)
    input_ids, attention_mask = batch()
    with torch.no_grad():
        expected = llama(input_ids, attention_mask=attention_mask).logits
        got = ours(input_ids, attention_mask=attention_mask).logits
    valid = attention_mask.bool()
    assert_close(got[valid], expected[valid], atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        assert_close(ours(input_ids, labels=input_ids).loss, llama(input_ids, labels=input_ids).loss)


def test_bidirectional_mode_matches_native_eurobert():
    config = tiny_config()
    ours = EuroBertClmMlmForMaskedLM(config).eval()
    native_config = transformers.EuroBertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=37,
        rms_norm_eps=1e-5,
        max_position_embeddings=2048,
        pad_token_id=3,
        bos_token_id=0,
        eos_token_id=1,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    native = transformers.EuroBertForMaskedLM(native_config).eval()
    native.load_state_dict(ours.state_dict(), strict=True)
    input_ids, attention_mask = batch()
    with torch.no_grad():
        expected = native(input_ids, attention_mask=attention_mask).logits
        got = ours(input_ids, attention_mask=attention_mask).logits
    valid = attention_mask.bool()
    assert_close(got[valid], expected[valid], atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="flash attention needs a CUDA GPU")
def test_flash_attention_2_matches_sdpa_on_gpu():
    pytest.importorskip("flash_attn")
    config = tiny_config(hidden_size=128, num_attention_heads=4, num_key_value_heads=2)
    sdpa = EuroBertClmMlmForMaskedLM(config).cuda().to(torch.bfloat16).eval()
    flash = EuroBertClmMlmForMaskedLM.from_pretrained(
        None, config=config, state_dict=sdpa.state_dict(), attn_implementation="flash_attention_2", dtype=torch.bfloat16
    )
    flash = flash.cuda().eval()
    input_ids, _ = batch(pad_last=False)
    for causal in (False, True):
        with torch.no_grad():
            a = sdpa(input_ids.cuda(), is_causal=causal).logits.float()
            b = flash(input_ids.cuda(), is_causal=causal).logits.float()
        assert_close(a, b, atol=2e-2, rtol=2e-2)


def test_in_process_auto_classes_round_trip(tmp_path):
    model = EuroBertClmMlmForMaskedLM(tiny_config()).eval()
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert set(saved["auto_map"]) == {"AutoConfig", *HEADS}
    assert (tmp_path / "modeling_eurobert.py").exists() and (tmp_path / "configuration_eurobert.py").exists()
    assert isinstance(AutoConfig.from_pretrained(tmp_path), EuroBertClmMlmConfig)
    input_ids, attention_mask = batch()
    for name, (auto_class, model_class) in HEADS.items():
        loaded = auto_class.from_pretrained(tmp_path).eval()
        assert type(loaded) is model_class, name
    reloaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert_close(
            reloaded(input_ids, attention_mask=attention_mask).logits,
            model(input_ids, attention_mask=attention_mask).logits,
            atol=0,
            rtol=0,
        )


@pytest.mark.slow  # a fresh process that cannot import this project
def test_remote_code_in_fresh_process_without_project_gives_identical_outputs(tmp_path):
    """Every Auto class loads a saved checkpoint with trust_remote_code in a process that cannot import this
    project, and gives the in-process outputs bit for bit."""
    config = tiny_config()
    input_ids, attention_mask = batch()
    expected = {}
    for name, (_, model_class) in HEADS.items():
        torch.manual_seed(1)
        model = model_class(config).eval()
        model.save_pretrained(tmp_path / name)
        with torch.no_grad():
            expected[name] = main_output(model(input_ids, attention_mask=attention_mask))
    torch.save({"input_ids": input_ids, "attention_mask": attention_mask, "expected": expected}, tmp_path / "io.pt")
    script = textwrap.dedent(f"""
        import importlib.util, sys, torch, transformers
        io = torch.load({str(tmp_path / "io.pt")!r})
        config = transformers.AutoConfig.from_pretrained({str(tmp_path / "AutoModel")!r}, trust_remote_code=True)
        assert type(config).__name__ == "EuroBertClmMlmConfig", type(config)
        for name, expected in io["expected"].items():
            auto_class = getattr(transformers, name)
            model = auto_class.from_pretrained({str(tmp_path)!r} + "/" + name, trust_remote_code=True).eval()
            assert "modeling_eurobert" not in sys.modules and "transformers_modules" in type(model).__module__
            with torch.no_grad():
                out = model(io["input_ids"], attention_mask=io["attention_mask"])
            got = out.logits if getattr(out, "logits", None) is not None else (
                torch.stack([out.start_logits, out.end_logits]) if getattr(out, "start_logits", None) is not None
                else out.last_hidden_state)
            assert torch.equal(got, expected), name
        print("remote-ok")
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["HF_HOME"] = str(tmp_path / "hf_home")
    result = subprocess.run(
        [sys.executable, "-c", HIDE_PROJECT + script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and "remote-ok" in result.stdout, result.stderr[-3000:]


def test_a_clm_checkpoint_attends_alike_with_and_without_remote_code(tmp_path):
    """Issue 46 item 10: a CLM checkpoint loaded bidirectional with plain `AutoModel` (native EuroBERT) and causal
    through this project's classes (what `trust_remote_code=True` runs): the flag silently changed the hidden states.
    Both are bidirectional now; the causal pretraining stays recorded and is what `--attention checkpoint` uses."""
    from evaluation.attention import resolved_attention
    from modeling_eurobert.export_native import make_plain_loadable

    torch.manual_seed(1)
    model = EuroBertClmMlmForMaskedLM(tiny_config()).eval()
    model.config.is_causal = True  # as a CLM run saves it
    model.save_pretrained(tmp_path / "clm")
    assert make_plain_loadable(tmp_path / "clm")
    input_ids, attention_mask = batch()
    with torch.no_grad():
        plain = transformers.AutoModel.from_pretrained(tmp_path / "clm").eval()
        ours = EuroBertClmMlmModel.from_pretrained(tmp_path / "clm").eval()
        assert type(plain).__name__ == "EuroBertModel" and not ours.config.is_causal
        assert_close(
            ours(input_ids, attention_mask).last_hidden_state, plain(input_ids, attention_mask).last_hidden_state
        )
    assert resolved_attention(tmp_path / "clm", "checkpoint") == "causal"


@pytest.mark.slow  # a fresh process that cannot import this project
def test_clm_checkpoint_loads_bidirectionally_with_is_causal_override_in_fresh_process(tmp_path):
    """A CLM checkpoint (the MLM class saved with is_causal=true, as the pretraining recipe saves it) loads causal
    into AutoModel and the task heads by default; `from_pretrained(dir, is_causal=False, trust_remote_code=True)`
    overrides the config field, so every head runs bidirectionally, as the paper fine-tunes CLM checkpoints.
    Checked through remote code in a process that cannot import this project."""
    torch.manual_seed(1)
    model = EuroBertClmMlmForMaskedLM(tiny_config()).eval()
    model.config.is_causal = True
    model.save_pretrained(tmp_path / "clm")
    assert json.loads((tmp_path / "clm" / "config.json").read_text())["is_causal"] is True
    input_ids, attention_mask = batch()
    with torch.no_grad():
        expected = {
            causal: model.model(input_ids, attention_mask, is_causal=causal).last_hidden_state
            for causal in (False, True)
        }
    torch.save({"input_ids": input_ids, "attention_mask": attention_mask, "expected": expected}, tmp_path / "io.pt")
    script = textwrap.dedent(f"""
        import importlib.util, torch, transformers
        io, path = torch.load({str(tmp_path / "io.pt")!r}), {str(tmp_path / "clm")!r}
        def hidden(model):
            backbone = getattr(model, "model", model)
            with torch.no_grad():
                return backbone(io["input_ids"], attention_mask=io["attention_mask"]).last_hidden_state
        default = transformers.AutoModel.from_pretrained(path, trust_remote_code=True).eval()
        assert default.config.is_causal is True and torch.equal(hidden(default), io["expected"][True])
        for name in ("AutoModel", "AutoModelForSequenceClassification", "AutoModelForTokenClassification",
                     "AutoModelForQuestionAnswering", "AutoModelForMaskedLM"):
            model = getattr(transformers, name).from_pretrained(path, is_causal=False, trust_remote_code=True).eval()
            assert model.config.is_causal is False, name
            assert torch.equal(hidden(model), io["expected"][False]), name
        print("bidirectional-ok")
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HOME=str(tmp_path / "hf_home"), HF_HUB_OFFLINE="1")
    result = subprocess.run(
        [sys.executable, "-c", HIDE_PROJECT + script],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and "bidirectional-ok" in result.stdout, result.stderr[-3000:]


@pytest.mark.slow  # a fresh process that cannot import this project
def test_automodel_of_an_lm_checkpoint_leaves_out_the_lm_head_alone(tmp_path):
    """Issue 54: a CPT result (an LM checkpoint plain transformers holds) loaded with `AutoModel`, in a process that
    cannot import this project. Through remote code the backbone declares the LM head expected-unused
    (`_keys_to_ignore_on_load_unexpected`): no LOAD REPORT. Plain AutoModel is transformers' own `EuroBertModel`, whose
    keys no checkpoint can change: its report lists `lm_head.weight` UNEXPECTED, as it does for BERT's head (docs/
    models.md says so); either way only the head is left out, nothing is missing and every backbone weight is the
    file's, so the hidden states are the in-process backbone's."""
    from modeling_eurobert.export_native import make_plain_loadable

    torch.manual_seed(1)
    model = EuroBertClmMlmForMaskedLM(tiny_config()).eval()
    model.save_pretrained(tmp_path / "cpt")
    assert make_plain_loadable(tmp_path / "cpt")
    input_ids, attention_mask = batch()
    with torch.no_grad():
        expected = model.model(input_ids, attention_mask).last_hidden_state
    torch.save({"input_ids": input_ids, "attention_mask": attention_mask, "expected": expected}, tmp_path / "io.pt")
    script = """
        import sys, torch, transformers
        from safetensors.torch import load_file
        io, path, remote = torch.load(sys.argv[1]), sys.argv[2], sys.argv[3] == "remote"
        print("-- loads", file=sys.stderr, flush=True)
        model, info = transformers.AutoModel.from_pretrained(path, trust_remote_code=remote, output_loading_info=True)
        print("-- loaded", file=sys.stderr, flush=True)
        assert ("transformers_modules" in type(model).__module__) == remote, type(model)
        assert sorted(info["unexpected_keys"]) == ([] if remote else ["lm_head.weight"]), info  # remote: ignored
        assert not info["missing_keys"] and not info["mismatched_keys"], info
        saved = load_file(path + "/model.safetensors")
        state = model.state_dict()
        assert all(torch.equal(state[key.removeprefix("model.")], value) for key, value in saved.items()
                   if key != "lm_head.weight")
        with torch.no_grad():
            hidden = model(io["input_ids"], attention_mask=io["attention_mask"]).last_hidden_state
        assert torch.equal(hidden, io["expected"])
        print("automodel-ok")
    """
    for mode in ("remote", "plain"):
        done = run_fresh(script, tmp_path, args=(tmp_path / "io.pt", tmp_path / "cpt", mode))
        assert done.returncode == 0 and "automodel-ok" in done.stdout, done.stderr[-3000:]
        loading = done.stderr.split("-- loads")[1].split("-- loaded")[0]
        if mode == "remote":
            assert "LOAD REPORT" not in loading and "UNEXPECTED" not in loading, loading
        else:  # transformers' native class reports the head it does not hold, and nothing else
            assert "LOAD REPORT" in loading and "lm_head.weight" in loading, loading
            assert "MISSING" not in loading and "MISMATCH" not in loading, loading


def test_sentence_transformers_mean_pooling_matches_pool(tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as models
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tok_models
    from transformers import PreTrainedTokenizerFast

    from modeling_eurobert import pool

    words = ["<bos>", "<eos>", "<mask>", "<pad>"] + [f"w{i}" for i in range(95)]
    tokenizer = Tokenizer(tok_models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<bos>",
        eos_token="<eos>",
        mask_token="<mask>",
        pad_token="<pad>",
        model_input_names=["input_ids", "attention_mask"],
    )
    model = EuroBertClmMlmModel(tiny_config()).eval()
    model.save_pretrained(tmp_path)
    fast.save_pretrained(tmp_path)
    transformer = models.Transformer(
        str(tmp_path), model_args={"trust_remote_code": True}, config_args={"trust_remote_code": True}
    )
    st = SentenceTransformer(modules=[transformer, models.Pooling(32, pooling_mode="mean")], device="cpu")
    sentences = ["w1 w2 w3", "w4 w5 w6 w7 w8 w9"]
    embeddings = st.encode(sentences, convert_to_tensor=True)
    encoded = fast(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state
    assert_close(embeddings, pool(hidden, encoded["attention_mask"], "mean"), atol=1e-5, rtol=1e-5)


def test_gradient_checkpointing_gives_same_gradients():
    model = EuroBertClmMlmForMaskedLM(tiny_config()).train()
    input_ids, _ = batch(pad_last=False)
    labels = torch.where(torch.rand(BATCH, SEQ) < 0.5, input_ids, -100)
    model(input_ids, labels=labels).loss.backward()
    plain = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model.activation_checkpointing_enable()
    model(input_ids, labels=labels).loss.backward()
    for name, param in model.named_parameters():
        assert_close(param.grad, plain[name], msg=name)
