"""Feature extraction as cached tasks: a rerun (an audit's batches, an extraction's chunks)
re-queries no model."""

from prefect import task

from trainspotter.backends import SCHEMES, ModelSpec, spec_fingerprint
from trainspotter.backends.spec import parse_references
from trainspotter.config import code_digest, fingerprint
from trainspotter.data import query_fields
from trainspotter.errors import BudgetExhausted
from trainspotter.features.features import FeatureConfig
from trainspotter.tasks import worker


def _retry_unless_budget(task, task_run, state) -> bool:
    """Retry transient failures, never a spent budget or a server that refuses every mode
    the API backend can use (the next try would fail the same)."""
    from trainspotter.backends.openai_compat import Incompatible, Unsupported

    try:
        state.result()
    except (BudgetExhausted, Incompatible, Unsupported):
        return False
    except Exception:
        return True
    return True


# The library code a feature row depends on: editing any of it recomputes cached chunks. The
# feature modules, then each backend scheme's own (backends.spec.SCHEMES: a new backend adds
# its modules there, not here); tests/unit/test_cache_keys.py checks it covers their imports.
FEATURE_CODE = ("trainspotter.features.extract", "trainspotter.features.answers", "trainspotter.features.black_answers",
                "trainspotter.features.answer_codec",
                "trainspotter.features.features",
                "trainspotter.features.catalog", "trainspotter.features.perturb", "trainspotter.features.probability",
                "trainspotter.features.ez", "trainspotter.features.references", "trainspotter.features.model_based",
                "trainspotter.features.twin_positions", "trainspotter.features.orientation")
EXTRACT_CODE = FEATURE_CODE + tuple(dict.fromkeys(m for scheme in SCHEMES.values() for m in scheme.code))


def chunk_cache_key(context, parameters) -> str:
    """Data fingerprint (ids + texts, and a twins audit's twin texts: the changed-position
    features depend on them) + config slice (models' weights and dtype, access, feature
    config) + digest of the feature code + whether the rows carry the model's answers (an
    audit's, for its sealed record): a rerun after a crash finds every finished chunk, an
    edited feature formula finds none."""
    return "chunk-" + fingerprint(
        code_digest(*EXTRACT_CODE), spec_fingerprint(parameters["model"]),
        [spec_fingerprint(r) for r in parse_references(parameters.get("reference"))], parameters["access"],
        parameters["features"].model_dump(exclude={"batch_size", "embedding_cache"}),
        [tuple(query_fields(p).values()) for p in parameters["passages"]], bool(parameters.get("answers")))


@task(cache_key_fn=chunk_cache_key, persist_result=True, retries=2, retry_delay_seconds=1,
      retry_condition_fn=_retry_unless_budget, task_run_name="extract[{chunk}]", tags=["model-calls"])
def extract_chunk(passages: list[dict], model: ModelSpec, reference, access: str,
                  features: FeatureConfig, chunk: int = 0, answers: bool = False) -> list[dict]:
    """Feature rows of one chunk of passages (one row per passage, library ``extract``);
    ``reference``: none, one or several model specs (``parse_references``); ``answers``: the
    rows carry the model's answers too (``features.answers``, for a sealed record).
    Only ``query_fields`` go in: the cache key covers nothing else. Computed by the CLI
    audit's model worker while one serves (``tasks.worker``: same code, same rows), else here."""
    passages = [query_fields(p) for p in passages]
    return worker.rows(passages, model, reference, access, features, answers)
