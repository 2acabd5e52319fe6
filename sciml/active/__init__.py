"""Active learning: a potential that labels what it does not know with a quantum-chemistry oracle.

``sciml learn`` (:mod:`sciml.commands.learn`) runs :class:`ActiveLearning`; see ``docs/active.md``.
"""

from sciml.active.dft import DFTLevel, PySCFCalculator, pyscf_dft
from sciml.active.exploration import Candidate, Exploration, ExplorationSettings, explore, select_frames
from sciml.active.label_cache import LabelCache
from sciml.active.labelling import Labeller, local_pool
from sciml.active.loop import ActiveLearning, LearningSettings
from sciml.active.oracles import Oracle, OracleFailure, gfn2_xtb, oracle_by_name
from sciml.active.store import LabelStore
from sciml.active.structures import conformers_from_smiles, molecule_from_smiles, rattled_copies, read_structure
from sciml.active.training import TrainingSettings, train_round

__all__ = [
    "ActiveLearning",
    "Candidate",
    "Exploration",
    "ExplorationSettings",
    "LabelStore",
    "LearningSettings",
    "Oracle",
    "OracleFailure",
    "PySCFCalculator",
    "DFTLevel",
    "LabelCache",
    "Labeller",
    "TrainingSettings",
    "conformers_from_smiles",
    "explore",
    "gfn2_xtb",
    "local_pool",
    "molecule_from_smiles",
    "oracle_by_name",
    "pyscf_dft",
    "rattled_copies",
    "read_structure",
    "select_frames",
    "train_round",
]
