"""``alpha`` and ``beta`` of every scalar kind, at the ends of float32's range."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg
from polygemm.errors import ArgumentTypeError

from tests.helpers import CPUArrayAPI, poisoned


@pytest.mark.parametrize("word", ["c", "C", "alpha", "beta", "variant"])
def test_gemm_keywords_given_to_matmul_name_gemm(ops, word):
    # matmul(a, b, c=c) or alpha= is told of polygemm.gemm, which takes them
    a, b = ops
    with pytest.raises(ArgumentTypeError, match=rf"unexpected keyword argument '{word}' \(matmul is numpy\.matmul's a @ b; "
                                                rf"polygemm\.gemm\(a, b, c, alpha=, beta=, variant=\) takes {word.lower()}\)"):
        pg.matmul(a, b, **{word: 1.0})


def test_blas_order_alpha_beta_by_position_is_told_the_keywords(ops):
    # gemm(a, b, c, 2.0, 1.0), BLAS's order, is told the keywords, not only "gemm() takes from 2 to 3 positional
    # arguments but 5 were given"
    a, b = ops
    c = poisoned()
    for func in (pg.gemm, pg.explain):
        with pytest.raises(ArgumentTypeError, match=r"takes from 2 to 3 positional arguments but 5 were given: alpha and beta "
                                                    r"are keywords: \w+\(a, b, c, alpha=\.\.\., beta=\.\.\.\)"):
            func(a, b, c, 2.0, 1.0)
    assert (c == 7.0).all()


def test_a_one_element_array_of_another_library_is_told_item(ops):
    # another library's one-element array is told alpha.item(), as a one-element NumPy array is
    a, b = ops
    with pytest.raises(ArgumentTypeError, match=r"a one-element \w+\.CPUArrayAPI is no scalar: pass beta\.item\(\)$"):
        pg.gemm(a, b, poisoned(), beta=CPUArrayAPI(np.array([2.0])))


def test_a_value_whose_repr_raises_is_still_told_what_is_wrong(ops):
    # an alpha whose __repr__ raises replaced polygemm's refusal with that error
    class Hostile:
        def __repr__(self):
            raise RuntimeError("repr exploded")

    a, b = ops
    with pytest.raises(ArgumentTypeError, match=r"\balpha\b.*real number.*<Hostile>"):
        pg.gemm(a, b, alpha=Hostile())


@pytest.mark.parametrize("call,words", [
    (lambda a, b, c: pg.matmul(input=a, other=b), r"^matmul\(\) got an unexpected keyword argument 'input'.*by position"),
    (lambda a, b, c: pg.gemm(input=c, mat1=a, mat2=b), r"^gemm\(\) got an unexpected keyword argument 'input'.*torch\.addmm's input is c"),
    (lambda a, b, c: pg.gemm(a), r"^gemm\(\) needs b: pass the operands first"),
    (lambda a, b, c: pg.matmul(), r"^matmul\(\) needs a and b"),
    (lambda a, b, c: pg.explain(b=b), r"^explain\(\) needs a"),
])
def test_operands_by_another_librarys_keywords_or_left_out_are_told_polygemms_way(call, words):
    """torch's keywords (input=, other=, mat1=, mat2=) without a and b by position: the hint for torch's names, not
    Python's bare "missing 2 required positional arguments"; a or b left out is said in polygemm's words."""
    a, b, c = np.ones((2, 3)), np.ones((3, 4)), np.ones((2, 4))
    with pytest.raises(pg.ArgumentTypeError, match=words):
        call(a, b, c)
    np.testing.assert_array_equal(pg.gemm(a=a, b=b, c=c), a @ b + c)  # a and b by their names
