import numpy as np
import pytest

from idaudit._validation import (
    check_embeddings,
    check_in_range,
    check_integer,
    check_option,
    check_pair,
    check_random_state,
    spawn_seeds,
)
from idaudit.exceptions import InvalidInputError


def test_check_random_state_accepts_seed_sequence_and_generator():
    g = np.random.default_rng(3)
    assert check_random_state(g) is g
    a = check_random_state(np.random.SeedSequence(5)).random()
    b = check_random_state(np.random.SeedSequence(5)).random()
    assert a == b
    assert check_random_state(7).random() == np.random.default_rng(7).random()


@pytest.mark.parametrize("bad", [1.5, "3", np.random.RandomState(0)])
def test_check_random_state_rejects_other_types(bad):
    with pytest.raises(TypeError, match="`rng` must be an int"):
        check_random_state(bad)


def test_check_random_state_rejects_negative_seed():
    with pytest.raises(InvalidInputError, match="non-negative"):
        check_random_state(-1)


def test_spawn_seeds_reproducible_and_distinct():
    s1, s2 = spawn_seeds(0, 5), spawn_seeds(0, 5)
    assert s1 == s2
    assert len(set(s1)) == 5


def test_check_embeddings_messages():
    with pytest.raises(InvalidInputError, match=r"2-D array .* got 1-D"):
        check_embeddings(np.zeros(3))
    with pytest.raises(InvalidInputError, match="at least 2 rows; got 1"):
        check_embeddings(np.zeros((1, 3)))
    with pytest.raises(InvalidInputError, match="at least one feature"):
        check_embeddings(np.zeros((3, 0)))
    x = np.ones((4, 2))
    x[1, 0] = np.nan
    with pytest.raises(InvalidInputError, match="1 row\\(s\\) with NaN or inf"):
        check_embeddings(x)


def test_check_pair_dimension_mismatch():
    with pytest.raises(InvalidInputError, match="got 512 vs 128"):
        check_pair(np.zeros((3, 512)), np.zeros((3, 128)))


def test_scalar_checks():
    assert check_in_range(0.5, "alpha", 0, 1) == 0.5
    with pytest.raises(InvalidInputError, match=r"`alpha` must be in \(0, 1\); got 1.5"):
        check_in_range(1.5, "alpha", 0, 1)
    with pytest.raises(InvalidInputError, match=r"\[0, 1\]"):
        check_in_range(float("nan"), "alpha", 0, 1, closed="both")
    with pytest.raises(TypeError, match="`n` must be an integer"):
        check_integer(2.0, "n")
    with pytest.raises(InvalidInputError, match="`n` must be >= 1; got 0"):
        check_integer(0, "n", minimum=1)
    with pytest.raises(InvalidInputError, match="one of 'a', 'b'"):
        check_option("c", "kind", ("a", "b"))


# -- declared parameter constraints -----------------------------------------------------------


def test_every_constraint_refuses_its_own_invalid_values() -> None:
    from idaudit._validation import (
        Boolean,
        Classifier,
        Device,
        IntegerOrOption,
        Interval,
        Label,
        MechanismLike,
        NoneOr,
        OptionOrPositive,
        Options,
        Positive,
        RandomState,
    )

    constraints = [
        Interval(0.0, 1.0),
        Interval(0.0, None, closed="left"),
        Interval(2, integer=True),
        Options(("a", "b")),
        Positive(),
        OptionOrPositive(("median",)),
        RandomState(),
        Boolean(),
        Device(),
        Label(r"[a-z_]+", "a lower-case label", frozenset({"seed"})),
        IntegerOrOption(("all",), minimum=1),
        NoneOr(Interval(0.0, None)),
        MechanismLike(),
        Classifier(("logistic", "random_forest")),
    ]
    for constraint in constraints:
        assert constraint.invalid(), constraint
        # the seed and device checks are shared with functions, whose arguments have these names
        name = {RandomState: "rng", Device: "device"}.get(type(constraint), "p")
        for value in constraint.invalid():
            with pytest.raises((TypeError, InvalidInputError), match=f"`{name}`"):
                constraint.check(value, name)


def test_validate_params_checks_each_parameter_and_requires_a_constraint() -> None:
    from idaudit._validation import Interval, Options, validate_params

    constraints = {"n": Interval(1, integer=True), "kind": Options(("x", "y"))}
    assert validate_params({"n": 2, "kind": "y"}, constraints) == {"n": 2, "kind": "y"}
    with pytest.raises(InvalidInputError, match=r"`kind` must be one of 'x', 'y'; got 'z'"):
        validate_params({"n": 2, "kind": "z"}, constraints)
    with pytest.raises(KeyError, match="no constraint declared"):
        validate_params({"n": 2, "other": 1}, constraints)


def test_an_open_ended_interval_excludes_infinity() -> None:
    # "(0, inf)" is open at inf: KDELRAuditor(margin=inf) or (floor=inf) gave a NaN epsilon
    from idaudit._validation import Interval

    for value in (float("inf"), np.float64(np.inf)):
        with pytest.raises(InvalidInputError, match=r"`margin` must be in \(0, inf\); got inf"):
            Interval(0.0, None).check(value, "margin")
        with pytest.raises(InvalidInputError, match=r"`t` must be in \(-inf, inf\); got inf"):
            check_in_range(value, "t")
    with pytest.raises(InvalidInputError, match=r"got -inf"):
        check_in_range(-np.inf, "t", None, 1.0, closed="right")
    assert check_in_range(1e300, "margin", 0.0, None) == 1e300


def test_kdelr_refuses_an_infinite_margin_or_floor() -> None:
    from idaudit import KDELRAuditor

    gen = np.random.default_rng(0)
    a, b = gen.normal(size=(20, 2)), gen.normal(size=(20, 2))
    for param in ("margin", "floor"):
        with pytest.raises(InvalidInputError, match=rf"`{param}` must be in \(0, inf\); got inf"):
            KDELRAuditor(**{param: float("inf")}).fit(a, b)


def test_messages_show_numpy_scalars_as_plain_values() -> None:
    with pytest.raises(InvalidInputError, match=r"`n` must be >= 1; got 0\.$"):
        check_integer(np.int64(0), "n", minimum=1)
    with pytest.raises(InvalidInputError, match=r"`alpha` must be in \(0, 1\); got 1\.5\.$"):
        check_in_range(np.float32(1.5), "alpha", 0, 1)


def test_none_or_anything_mechanism_and_classifier_accept_what_they_should() -> None:
    from sklearn.linear_model import LogisticRegression

    from idaudit._validation import Anything, Classifier, Interval, MechanismLike, NoneOr

    assert NoneOr(Interval(0.0, None)).check(None, "p") is None
    assert NoneOr(Interval(0.0, None)).check(2, "p") == 2.0
    with pytest.raises(InvalidInputError, match=r"`p` must be in \(0, inf\); got inf"):
        NoneOr(Interval(0.0, None)).check(float("inf"), "p")
    thing = object()
    assert Anything().check(thing, "p") is thing
    assert Anything().invalid() == ()  # refuses nothing: checked where its meaning is known

    class Mech:
        identities = ("a", "b")

        def sample(self, identity: object, n: int, *, rng: object) -> None: ...

    mech = Mech()
    assert MechanismLike().check(mech, "mechanism") is mech
    clf = LogisticRegression()
    assert Classifier(("logistic",)).check(clf, "classifier") is clf
    assert Classifier(("logistic",)).check("logistic", "classifier") == "logistic"
    with pytest.raises(InvalidInputError, match="`c` must be one of 'logistic' or a scikit"):
        Classifier(("logistic",)).check("random_forest", "c")

    class NotClonable(LogisticRegression):
        def __init__(self) -> None:
            self.C = 2.0  # not a parameter of __init__: clone cannot copy it

        def get_params(self, deep: bool = True) -> dict[str, object]:
            return {"C": 1.0}

    with pytest.raises(TypeError, match=r"`c` must be clonable with sklearn\.base\.clone"):
        Classifier(("logistic",)).check(NotClonable(), "c")
