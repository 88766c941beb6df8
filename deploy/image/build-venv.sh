#!/bin/sh
# Builder stage of deploy/Dockerfile: the project's wheel, installed with its locked
# dependencies, the CPU torch and the postgres, docker and k8s extras into the venv $1. Fails if a CUDA torch
# (or any nvidia-* package) got in.
set -eu
venv="$1"
[ -n "${PIP_CERT:-}" ] && export PIP_CERT || unset PIP_CERT
python3 -m venv "$venv"
pip="$venv/bin/pip"
"$pip" install --upgrade pip

# 1. torch 2.13.0, CPU build: from a wheel in deploy/wheels/ if one is there, else the CPU index.
torch_wheel=$(ls /wheels/torch-2.13.0+cpu-*.whl 2>/dev/null | head -n 1 || true)
if [ -n "$torch_wheel" ]; then
  "$pip" install "$torch_wheel"
else
  "$pip" install --index-url "$TORCH_INDEX_URL" 'torch==2.13.0+cpu'
fi

# 2. the project's wheel (not an editable checkout), then the README's install command on it.
"$pip" wheel --no-deps --wheel-dir /tmp/dist /src
wheel=$(ls /tmp/dist/infra_rag_assets-*.whl)
"$pip" install -c /src/requirements.lock 'torch==2.13.0' "${wheel}[postgres,docker,k8s]"

# 3. what the image must not carry.
"$venv/bin/python" -c "import torch, sys; sys.exit(f'CUDA torch {torch.__version__}' if torch.version.cuda else 0)"
if "$pip" list --format=freeze | grep -i '^nvidia-'; then
  echo "nvidia packages in the venv: a CUDA torch was resolved" >&2
  exit 1
fi
"$pip" uninstall -y pip >/dev/null  # the runtime installs nothing
# Bytecode for everything: under a read-only root filesystem Python cannot write it at run time,
# and compiling torch, transformers and dagster from source on every start costs tens of seconds.
"$venv/bin/python" -m compileall -q -j 0 "$venv/lib" >/dev/null || true
