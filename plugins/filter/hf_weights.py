# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the hf_weights role; the logic is in plugin_utils/_hf_weights.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._hf_weights import (
    force_list, held, input_errors, license_notice, select_models, space_errors, weights_facts)


def hf_weights_select(models_by_path, path, accept_drafter):
    """``{fetch: [...], refused: [...]}`` for the path; drafters only when their license is accepted."""
    fetch, refused = select_models(models_by_path, path, bool(accept_drafter))
    return {"fetch": fetch, "refused": refused}


def hf_weights_input_errors(models_by_path, path, distribution, verify):
    return input_errors(path, models_by_path, distribution, verify)


def hf_weights_license_notice(refused):
    return license_notice(refused)


def hf_weights_space_errors(entries, node, path):
    return space_errors(node, entries, path)


def hf_weights_force(held_models):
    return force_list(held_models)


def hf_weights_pins(models):
    """Only ``repo_id`` and ``revision`` of each model, for modules that take nothing else."""
    return [{"repo_id": m["repo_id"], "revision": m["revision"]} for m in models or []]


def hf_weights_held(results):
    return held(results)


def hf_weights_facts(snapshots, path, refused):
    return weights_facts(path, snapshots, refused)


class FilterModule(object):
    def filters(self):
        return {
            "hf_weights_select": hf_weights_select,
            "hf_weights_input_errors": hf_weights_input_errors,
            "hf_weights_license_notice": hf_weights_license_notice,
            "hf_weights_space_errors": hf_weights_space_errors,
            "hf_weights_facts": hf_weights_facts,
            "hf_weights_held": hf_weights_held,
            "hf_weights_pins": hf_weights_pins,
            "hf_weights_force": hf_weights_force,
        }
