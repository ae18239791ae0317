# nnue-forge on a CUDA machine. Build: docker build -t nnue-forge .
# Run:   docker run --gpus all -v $PWD/data:/data nnue-forge nnue train trainer=gpu data.path=/data/ds ...
FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-dev gcc git \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/nnue-forge
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# torch first, pinned to the project's version; on this image pip takes the CUDA build
# (with its matching triton) from PyPI.
RUN pip install "torch==2.13.0"
COPY pyproject.toml README.md ./
COPY nnue nnue
COPY pipeline pipeline
COPY trainer trainer
COPY kernels kernels
COPY inference inference
COPY conf conf
COPY bench bench
COPY selfplay selfplay
COPY hydra_plugins/nnue_forge_launchers hydra_plugins/nnue_forge_launchers
RUN pip install .
COPY data/sample data/sample
COPY data/demo data/demo
COPY scripts scripts

CMD ["nnue", "--help"]
