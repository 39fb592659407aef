# Sourced by the bench/*_gpu*.sh scripts before they start Dawn on a device machine: unpacks the Vulkan loader
# and the GL dispatch libraries NVIDIA's ICD needs, where they are carried as .gl/*.deb (or the files $DEBS
# names; /work/.library/device/README.md says how to fetch them), and names NVIDIA's ICD unless VK_DRIVER_FILES
# is set. On a machine with neither it does nothing.
gpu_device_debs=0
for f in ${DEBS:-.gl/*.deb}; do
  if [ -f "$f" ]; then
    dpkg -x "$f" /
    gpu_device_debs=1
  fi
done
if [ "$gpu_device_debs" = 1 ]; then ldconfig; fi
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nvidia_icd" ]; then export VK_DRIVER_FILES=$nvidia_icd; fi
