#include <string>
bool is_mi300(){ hipDeviceProp_t p; hipGetDeviceProperties(&p, 0); return std::string(p.gcnArchName).find("gfx942") == 0; }
